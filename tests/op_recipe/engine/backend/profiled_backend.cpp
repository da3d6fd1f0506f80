#define AMPWB_OP(name, time_class, params, args) void name params override;
#include "backend/backend_ops.def"

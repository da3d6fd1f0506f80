// A layering fixture, never compiled: a layer (nn) that includes a higher one (train). The test
// layering.refuses_upward_include runs cmake/CheckLayerIncludes.cmake over this folder and expects it refused.
#include <vector>

#include "nn/layer.h"
#include "train/trainer.h"

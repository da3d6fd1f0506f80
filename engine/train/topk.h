// The top-k accuracy's one rule, for the trainer that measures it and every view that shows it.
#pragma once

#include <cstdint>

namespace ampwb {

// Whether a top-k of `k` says anything about a dataset of `classes` (0: not known yet). A k that covers every class
// counts every image, 100% whatever the model answers: such a top-k is not reported.
inline bool topk_meaningful(int64_t k, int64_t classes) { return k > 0 && (classes == 0 || k < classes); }

}  // namespace ampwb

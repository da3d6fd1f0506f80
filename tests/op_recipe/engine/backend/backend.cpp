void Backend::negate_twice(const Tensor& x, Tensor& y) { negate(x, y), negate(y, y); }

class ForwardingBackend : public Backend {
  void negate(const Tensor& x, Tensor& y) override { inner_->negate(x, y); }  // by hand: the next op is missed
};

class CpuBackend final : public Backend {
  void negate(const Tensor& x, Tensor& y) override;
};

class CudaBackend final : public Backend {};  // negate forgotten

class FaultyBackend final : public Backend {};  // would list every op by hand

constexpr std::int32_t MATH_FIDELITY = 4;

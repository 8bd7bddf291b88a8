constexpr bool APPROX = false;

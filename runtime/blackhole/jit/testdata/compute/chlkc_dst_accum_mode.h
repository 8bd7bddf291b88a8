constexpr bool DST_ACCUM_MODE = true;

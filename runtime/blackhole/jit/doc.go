// Package jit builds Blackhole Tensix firmware and tcc kernels into the
// images the runtime loads, doing in Go what tt-metal's JIT build
// (tt_metal/jit_build/{build,genfiles}.cpp, llrt/hal/tt-1xx/blackhole/bh_hal.cpp,
// llrt/tt_elffile.cpp) does in C++.
//
// The pieces:
//
//   - Toolchain finds the RISC-V compiler. tt-metal's own SFPI compiler
//     (riscv-tt-elf-g++) is preferred; otherwise a stock
//     riscv64-unknown-elf-g++ is used with the deviations the stock compiler
//     needs: -march=rv32im_zicsr_zifencei_zba_zbb instead of -mcpu=tt-bh,
//     -nostdlib plus the rv32im/ilp32 libgcc.a by path, newlib libstdc++ and
//     picolibc headers, and for compute kernels a stub header declaring the
//     SFPI builtins (sfpi_stub.h, embedded) together with an overlay copy of
//     sfpi.h whose "builtins missing" guard is disabled, and an include shim
//     (shim.go) holding rewritten copies of the two tt-llk headers GCC 12
//     rejects, so an unmodified tt-metal tree builds. Compute kernels that
//     really use the SFPU then fail to link; that failure is reported as
//     *NeedsSFPUError.
//
//   - Firmware builds the five firmware ELFs (brisc, ncrisc, trisc0..2),
//     their linker scripts and hw objects, and the weakened copies kernels
//     link against with --just-symbols, into a directory keyed by a content
//     hash of the toolchain, the tt-metal sources and the flags.
//
//   - BuildKernel generates the JIT files of one kernel of a programs.json
//     program (kernel_includes.hpp or chlkc_{unpack,math,pack}.cpp,
//     defines_generated.h, the data format, tile dims, fidelity, approx,
//     dst accumulation and dst sync headers), compiles and links it per
//     processor (reader/writer on BRISC or NCRISC, compute on TRISC0..2 as
//     UNPACK, MATH and PACK) with --emit-relocs against the weakened
//     firmware, and turns each ELF into a position-independent image (XIP):
//     absolute lui/lo12 pairs that point into text become auipc-relative,
//     pc-relative pairs from text to data become absolute, and the text and
//     data segments are packed back to back. Images are cached by a content
//     hash of everything that goes into them.
//
//   - EthFirmware builds the active-erisc firmware of both ERISCs of an
//     active ethernet core in tt-metal's 2-ERISC mode (active_erisc,
//     subordinate_erisc) and BuildKernel builds a kernel with an Ethernet
//     config against its ERISC's firmware into one image, at
//     Images[EthImage] (RISCV_0) or Images[Eth1Image] (RISCV_1) (eth.go).
//
// Caches live under Env.CacheDir (default: os.UserCacheDir()/tcc/jit):
// firmware/<hash>/, firmware-eth/<hash>/ and kernels/<hash>/.
package jit

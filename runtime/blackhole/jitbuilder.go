package blackhole

import (
	"errors"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/runtime/blackhole/firmware"
	"github.com/tcc-dev/tcc/runtime/blackhole/jit"
)

// JITBuilder is the Builder of package jit: firmware and kernels built
// with the toolchain of e, SFPU kernels without the SFPI compiler skipped.
type JITBuilder struct{ Env *jit.Env }

// Firmware implements Builder.
func (b JITBuilder) Firmware() (firmware.Set, error) {
	dir, err := jit.Firmware(b.Env)
	if err != nil {
		return firmware.Set{}, err
	}
	return firmware.ReadSet(dir)
}

// EthFirmware implements EthFirmwareBuilder: both ERISCs' active-erisc
// firmware (jit.EthFirmware).
func (b JITBuilder) EthFirmware() (firmware.EthSet, error) {
	dir, err := jit.EthFirmware(b.Env)
	if err != nil {
		return firmware.EthSet{}, err
	}
	return firmware.ReadEthSet(dir)
}

// Kernel implements Builder.
func (b JITBuilder) Kernel(buildDir string, p *hostcfg.ProgramConfig, k *hostcfg.KernelConfig) (map[int][]byte, error) {
	imgs, err := jit.BuildKernel(b.Env, buildDir, p, k)
	var sfpu *jit.NeedsSFPUError
	if errors.As(err, &sfpu) {
		return nil, &SkipError{Reason: sfpu.Error()}
	}
	if err != nil {
		return nil, err
	}
	out := map[int][]byte{}
	for i, img := range imgs {
		if img != nil {
			out[i] = img
		}
	}
	return out, nil
}

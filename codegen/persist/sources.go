package persist

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/cpp"
	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/codegen/kir"
	"github.com/tcc-dev/tcc/codegen/target"
)

// Sources prints persistent program p (prepared by WithTables) for the
// card: its host config with the persistent section (hostcfg.Persistent),
// and the files of a build directory: kernels/<role>_<hash>.cpp per merged
// kernel (codegen/cpp.PrintKernel; the config's kernels' sources point at
// them), kernels/tcc_sfpu.h when a kernel includes it and
// kernels/tcc_persist.h. `tcc build --persistent` writes these, and the
// runtime compiles them with the JIT; the same program gives byte-identical
// files. Errors are the printer's and hostcfg's.
func Sources(p *kir.Program, t *target.Target) (map[string][]byte, *hostcfg.ProgramConfig, error) {
	if p == nil || p.Persist == nil || p.Buffer(kir.TablesBuffer) == nil {
		return nil, nil, fmt.Errorf("persist: Sources needs a persistent program prepared by WithTables")
	}
	cfg, err := hostcfg.ConfigValidated(p, t)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Persistent, err = hostcfg.Persistent(p, t); err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{}
	for _, k := range p.Kernels {
		src, err := cpp.PrintKernel(p, k)
		if err != nil {
			return nil, nil, err
		}
		sum := sha256.Sum256(src)
		name := fmt.Sprintf("kernels/%s_%s.cpp", k.Role, hex.EncodeToString(sum[:6]))
		files[name] = src
		cfg.Kernel(k.Name).Source = name
	}
	codegen.AddSFPUHeader(files)
	// The phase machinery every merged kernel includes.
	files["kernels/"+cpp.PersistHeaderName] = []byte(cpp.PersistHeader())
	return files, cfg, nil
}

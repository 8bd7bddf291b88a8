package qwen27b

import (
	"fmt"
	"strings"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/config"
)

// HostInfo describes how a host runs a qwen27b build made with args: the
// fill of every input and the checkpoint source of every weight (the
// programs.json manifest).
func (Model) HostInfo(a models.Args) (hostcfg.HostInfo, error) {
	o, err := OptionsFrom(a)
	if err != nil {
		return nil, err
	}
	return hostInfo{o.Config}, nil
}

type hostInfo struct{ c *config.Config }

// inputFills says how each input is filled (see BuildGraph).
var inputFills = map[string]string{
	"tokens":   "token ids, uint32: one per user in decode ([B]), seq per user in prefill ([B, S])",
	"pos":      "uint32: the position of the step's first new token; decode: one per user ([B], user b at pos[b]), prefill: one for all users ([1])",
	"rope.cos": "bf16 rotary table: row r holds cos(p_r * theta^(-2*(i mod rotary_dim/2)/rotary_dim)) for the row's position p_r (decode: one row per user at pos; prefill: one row per token from pos)",
	"rope.sin": "bf16 rotary table: as rope.cos with sin",
}

// StateInit: the device loop's tokens and positions are written by the
// host once, before the first device-loop step; other state starts as
// zeros.
func (h hostInfo) StateInit(name string) string {
	switch name {
	case LoopTokens:
		return "uint32 [B, 1, 1]: each user's token for the first device-loop step (the prompt's next token), written once; each step then writes its greedy next tokens here"
	case LoopPos:
		return "uint32 [B]: each user's position for the first device-loop step, written once; each step then adds 1"
	}
	return ""
}

func (h hostInfo) InputFill(name string) string {
	if f, ok := inputFills[name]; ok {
		return f
	}
	return "host data"
}

// WeightSource: every weight is the checkpoint tensor of the same name;
// 2-D projections (and the GDN conv taps) are stored transposed to
// [in, out] ([K, C] for conv1d's [C, 1, K]); ShareOf gives the cut.
func (h hostInfo) WeightSource(name string, devices int) (hostcfg.WeightSource, error) {
	if name == RopeCosTable || name == RopeSinTable {
		fn := "cos"
		if name == RopeSinTable {
			fn = "sin"
		}
		return hostcfg.WeightSource{Tensor: name, Axis: -1, Computed: fmt.Sprintf("bf16 [max_seq, rotary_dim]: row p holds %s(p * theta^(-2*(i mod rotary_dim/2)/rotary_dim)) for column i (rope.%s of position p); not in the checkpoint", fn, fn)}, nil
	}
	sh, err := ShareOf(h.c, name, devices)
	if err != nil {
		return hostcfg.WeightSource{}, err
	}
	transposed := strings.Contains(name, "proj") || strings.HasSuffix(name, "conv1d.weight") || name == "lm_head.weight"
	return hostcfg.WeightSource{Tensor: name, Transposed: transposed, Axis: sh.Axis, Parts: sh.Parts, Blocks: sh.Blocks, Pad: sh.Pad}, nil
}

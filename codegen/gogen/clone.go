package gogen

import (
	"maps"
	"slices"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// clone deep-copies a config: the result shares no slice, map or pointer
// with c, and every nil slice, map or pointer of c stays nil (as a round
// trip through c's JSON form keeps it: none of them is omitempty).
func clone(c *hostcfg.ProgramConfig) *hostcfg.ProgramConfig {
	out := *c
	out.Kernels = cloneEach(c.Kernels, cloneKernel)
	out.CBs = slices.Clone(c.CBs)
	for i := range out.CBs {
		out.CBs[i].Cores = slices.Clone(out.CBs[i].Cores)
	}
	out.Semaphores = cloneSemaphores(c.Semaphores)
	out.Buffers = slices.Clone(c.Buffers)
	for i := range out.Buffers {
		b := &out.Buffers[i]
		b.Shard = clonePtr(b.Shard)
		b.Blocks = clonePtr(b.Blocks)
	}
	if p := c.Persistent; p != nil {
		q := *p
		q.Tables.RingCommonArgs = slices.Clone(p.Tables.RingCommonArgs)
		q.Phases = cloneEach(p.Phases, func(ph hostcfg.PhaseConfig) hostcfg.PhaseConfig {
			ph.Cores = slices.Clone(ph.Cores)
			ph.Semaphores = cloneSemaphores(ph.Semaphores)
			ph.CBs = slices.Clone(ph.CBs)
			for i := range ph.CBs {
				ph.CBs[i].Cores = slices.Clone(ph.CBs[i].Cores)
			}
			ph.Kernels = slices.Clone(ph.Kernels)
			return ph
		})
		out.Persistent = &q
	}
	return &out
}

func cloneKernel(k hostcfg.KernelConfig) hostcfg.KernelConfig {
	k.NoC = clonePtr(k.NoC)
	k.Cores = slices.Clone(k.Cores)
	if k.Compute != nil {
		c := *k.Compute
		c.UnpackToDestFP32 = slices.Clone(c.UnpackToDestFP32)
		k.Compute = &c
	}
	k.Ethernet = clonePtr(k.Ethernet)
	k.Defines = maps.Clone(k.Defines)
	k.CompileArgs = slices.Clone(k.CompileArgs)
	k.RuntimeArgNames = slices.Clone(k.RuntimeArgNames)
	k.RuntimeArgs = cloneEach(k.RuntimeArgs, func(a hostcfg.CoreArgs) hostcfg.CoreArgs {
		a.Values = slices.Clone(a.Values)
		return a
	})
	k.CommonRuntimeArgs = slices.Clone(k.CommonRuntimeArgs)
	return k
}

func cloneSemaphores(s []hostcfg.SemaphoreConfig) []hostcfg.SemaphoreConfig {
	return cloneEach(s, func(x hostcfg.SemaphoreConfig) hostcfg.SemaphoreConfig {
		x.Cores = slices.Clone(x.Cores)
		return x
	})
}

// cloneEach is s copied with f applied to every element (nil for nil).
func cloneEach[T any](s []T, f func(T) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

// clonePtr is a pointer to a copy of *p (nil for nil).
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	x := *p
	return &x
}

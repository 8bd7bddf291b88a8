package cli

import (
	"github.com/tcc-dev/tcc/ir"
	"github.com/tcc-dev/tcc/models"
	"github.com/tcc-dev/tcc/models/srcbtable"
)

// srcBNames returns the model's weights-on-SrcB table for args on mesh
// (srcbtable.Names with --disable's pipeline; nil with
// --weights-on-srcb=false), computed once per command: the table depends
// on the flags and parameters other than the step's mode and length,
// which every graph of one command shares.
func (mf *modelFlags) srcBNames(m models.Model, args models.Args, mesh ir.Mesh) ([]string, error) {
	if !mf.weightsOnSrcB {
		return nil, nil
	}
	if mf.srcBTable != nil {
		return *mf.srcBTable, nil
	}
	opts, err := pipelineOptions(mf.disable)
	if err != nil {
		return nil, err
	}
	names, err := srcbtable.Names(m, args, mesh, opts)
	if err != nil {
		return nil, err
	}
	mf.srcBTable = &names
	return names, nil
}

// storeOnSrcB marks g's weights named in the model's table (srcBNames)
// as stored in transposed tiles (srcbtable.Store: it refuses a graph that
// reads one other than as a matmul's weight).
func (mf *modelFlags) storeOnSrcB(m models.Model, args models.Args, g *ir.Graph) error {
	names, err := mf.srcBNames(m, args, g.Mesh)
	if err != nil {
		return err
	}
	return srcbtable.Store(g, names, srcbtable.StepName(args))
}

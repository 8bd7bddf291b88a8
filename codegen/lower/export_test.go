package lower

// Knobs of the prefill attention for tests that compare a change with
// what the program did before it.
var (
	PrefillKBlocks    = &prefillKBlocks
	PrefillBalanced   = &prefillBalanced
	PrefillChunk      = &prefillChunk
	PrefillQScaled    = &prefillQScaled
	PrefillKVBuffers  = &prefillKVBuffers
	PrefillGateAfterQ = &prefillGateAfterQ
	PrefillOutPages   = &prefillOutPages
	PrefillKRowWait   = &prefillKRowWait
	PrefillOGroup     = &prefillOGroup
	PrefillMinShift   = &prefillMinShift
	PrefillMaskKeep   = &prefillMaskKeep
	PrefillExpGroup   = &prefillExpGroup
)

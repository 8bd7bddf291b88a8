package codegen

// SetLowerMemo turns the lowering memo (lowerMemo) on or off for the
// tests and returns a function restoring the previous setting.
func SetLowerMemo(on bool) (restore func()) {
	old := lowerMemoOff
	lowerMemoOff = !on
	return func() { lowerMemoOff = old }
}

package transfer

// SetMaxLine sets the longest line a dump may hold until the returned
// function restores it.
func SetMaxLine(n int) (restore func()) {
	old := maxLine
	maxLine = n
	return func() { maxLine = old }
}

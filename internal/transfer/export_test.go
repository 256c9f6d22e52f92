package transfer

// SetMaxLine sets the longest line a dump may hold until the returned
// function restores it.
func SetMaxLine(n int) (restore func()) {
	old := maxLine
	maxLine = n
	return func() { maxLine = old }
}

// SetPages sets the page sizes of sessions, runs, messages and events
// until the returned function restores them, so that tests turn every
// paging loop with few records.
func SetPages(sessions, runs, messages, events int) (restore func()) {
	old := [4]int{sessionPage, runPage, messagePage, eventPage}
	sessionPage, runPage, messagePage, eventPage = sessions, runs, messages, events
	return func() { sessionPage, runPage, messagePage, eventPage = old[0], old[1], old[2], old[3] }
}

package scripted

import "sync/atomic"

// Crash faults end the process in the middle of a model call, as an
// out-of-memory kill or a bug set off by a model's answer would: the tests
// of what survives a process dying under its runs use them (the option
// crash_after_tokens). They are off unless the process turns them on with
// EnableCrashFaults, which kerneld does only when its environment asks
// for test faults: an agent file alone can never make a daemon crash, and
// one that asks for a crash fault fails to load while they are off.
var crashFault atomic.Pointer[func()]

// EnableCrashFaults lets agents use crash_after_tokens, which calls crash
// at that point of every model call. crash should end the process at
// once, as a kill does; nil turns the faults off again.
func EnableCrashFaults(crash func()) {
	if crash == nil {
		crashFault.Store(nil)
		return
	}
	crashFault.Store(&crash)
}

// crashNow calls the crash EnableCrashFaults set.
func crashNow() {
	if crash := crashFault.Load(); crash != nil {
		(*crash)()
	}
}

package redis

import (
	"embed"

	goredis "github.com/redis/go-redis/v9"
)

// lua holds the store's scripts; each runs with lib.lua before it.
//
//go:embed lua/*.lua
var lua embed.FS

// newScript returns the script lua/name.lua, prefixed with lua/lib.lua.
func newScript(name string) *goredis.Script {
	lib, err := lua.ReadFile("lua/lib.lua")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	body, err := lua.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return goredis.NewScript(string(lib) + string(body))
}

// The scripts, one per kind of write.
var (
	scriptSessionCreate  = newScript("session_create")
	scriptSessionUpdate  = newScript("session_update")
	scriptSessionDelete  = newScript("session_delete")
	scriptRunCreate      = newScript("run_create")
	scriptRunUpdate      = newScript("run_update")
	scriptRunFind        = newScript("run_find")
	scriptRunList        = newScript("run_list")
	scriptRunStart       = newScript("run_start")
	scriptEventsAppend   = newScript("events_append")
	scriptMessagesAppend = newScript("messages_append")
	scriptMemoryPut      = newScript("memory_put")
	scriptMemoryDelete   = newScript("memory_delete")
	scriptLeaseAcquire   = newScript("lease_acquire")
	scriptLeaseRenew     = newScript("lease_renew")
	scriptLeaseRelease   = newScript("lease_release")
	scriptQuotaTake      = newScript("quota_take")
	scriptQuotaRuns      = newScript("quota_runs")
	scriptQuotaUnlock    = newScript("quota_unlock")
)

// allScripts lists every script, for Open to load.
var allScripts = []*goredis.Script{
	scriptSessionCreate, scriptSessionUpdate, scriptSessionDelete,
	scriptRunCreate, scriptRunUpdate, scriptRunFind, scriptRunList, scriptRunStart,
	scriptEventsAppend, scriptMessagesAppend, scriptMemoryPut, scriptMemoryDelete,
	scriptLeaseAcquire, scriptLeaseRenew, scriptLeaseRelease,
	scriptQuotaTake, scriptQuotaRuns, scriptQuotaUnlock,
}

package errdefs

// Code is the stable, snake_case name of a problem that clients switch on
// (the "code" of a problem details body). Every code kerneld answers is
// one of the Answered constants, and api/openapi.yaml lists exactly those
// (TestProblemCodesMatchSpec in internal/httpapi holds the two equal);
// the Internal codes classify errors between kerneld's own layers, or
// its commands, and are turned into another answer before they reach a
// client. Compare codes with these constants, never with strings
// (TestNoBareCodes).
type Code string

// The codes a client may receive.
const (
	CodeAgentNotAllowed               Code = "agent_not_allowed"
	CodeAgentNotFound                 Code = "agent_not_found"
	CodeAgentUnavailable              Code = "agent_unavailable"
	CodeApprovalDecided               Code = "approval_decided"
	CodeApprovalNotFound              Code = "approval_not_found"
	CodeApprovalNotPending            Code = "approval_not_pending"
	CodeBodyTooLarge                  Code = "body_too_large"
	CodeBodyTooSlow                   Code = "body_too_slow"
	CodeChatNotFound                  Code = "chat_not_found"
	CodeClientToolsDisabled           Code = "client_tools_disabled"
	CodeConflict                      Code = "conflict"
	CodeConsoleFileNotFound           Code = "console_file_not_found"
	CodeCursorAhead                   Code = "cursor_ahead"
	CodeDeliveryNotFound              Code = "delivery_not_found"
	CodeDeliveryPending               Code = "delivery_pending"
	CodeFeedUnavailable               Code = "feed_unavailable"
	CodeForbidden                     Code = "forbidden"
	CodeHistoryConflict               Code = "history_conflict"
	CodeIdempotencyKeyReused          Code = "idempotency_key_reused"
	CodeImageNotFound                 Code = "image_not_found"
	CodeImageQuotaExceeded            Code = "image_quota_exceeded"
	CodeImagesNotKept                 Code = "images_not_kept"
	CodeInternal                      Code = "internal"
	CodeInterruptNotPending           Code = "interrupt_not_pending"
	CodeInvalidImage                  Code = "invalid_image"
	CodeInvalidRequest                Code = "invalid_request"
	CodeInvalidTransition             Code = "invalid_transition"
	CodeLimitExceeded                 Code = "limit_exceeded"
	CodeMaxChildrenExceeded           Code = "max_children_exceeded"
	CodeMaxDepthExceeded              Code = "max_depth_exceeded"
	CodeMCPServerNameTaken            Code = "mcp_server_name_taken"
	CodeMemoryFull                    Code = "memory_full"
	CodeMemoryKeyNotFound             Code = "memory_key_not_found"
	CodeMessageNotCompleted           Code = "message_not_completed"
	CodeMessageNotFound               Code = "message_not_found"
	CodeMethodNotAllowed              Code = "method_not_allowed"
	CodeMetricsDisabled               Code = "metrics_disabled"
	CodeNotFound                      Code = "not_found"
	CodeOpenAPIUnavailable            Code = "openapi_unavailable"
	CodeOperatorKeyRequired           Code = "operator_key_required"
	CodeOriginNotAllowed              Code = "origin_not_allowed"
	CodeOverrideNotAllowed            Code = "override_not_allowed"
	CodePermissionModeNotAllowed      Code = "permission_mode_not_allowed"
	CodeParentNotFound                Code = "parent_not_found"
	CodeQueueFull                     Code = "queue_full"
	CodeQuotaExceeded                 Code = "quota_exceeded"
	CodeRateLimited                   Code = "rate_limited"
	CodeRequestTimeout                Code = "request_timeout"
	CodeRouteNotFound                 Code = "route_not_found"
	CodeRunNotFound                   Code = "run_not_found"
	CodeRunNotRegenerable             Code = "run_not_regenerable"
	CodeRunNotWaiting                 Code = "run_not_waiting"
	CodeScheduleExists                Code = "schedule_exists"
	CodeScheduleLimit                 Code = "schedule_limit"
	CodeScheduleNotFound              Code = "schedule_not_found"
	CodeSchedulesUnavailable          Code = "schedules_unavailable"
	CodeSessionBusy                   Code = "session_busy"
	CodeSessionClosed                 Code = "session_closed"
	CodeSessionExists                 Code = "session_exists"
	CodeSessionHasChildren            Code = "session_has_children"
	CodeSessionNotFound               Code = "session_not_found"
	CodeSessionRunning                Code = "session_running"
	CodeShuttingDown                  Code = "shutting_down"
	CodeStarting                      Code = "starting"
	CodeStorageUnavailable            Code = "storage_unavailable"
	CodeStoreClosed                   Code = "store_closed"
	CodeStoreUnavailable              Code = "store_unavailable"
	CodeStreamsUnavailable            Code = "streams_unavailable"
	CodeTenantKeyRequired             Code = "tenant_key_required"
	CodeTimeout                       Code = "timeout"
	CodeTooManyConnections            Code = "too_many_connections"
	CodeTooManyConnectionsFromAddress Code = "too_many_connections_from_address"
	CodeTooManyStreams                Code = "too_many_streams"
	CodeUnansweredToolCalls           Code = "unanswered_tool_calls"
	CodeUnauthorized                  Code = "unauthorized"
	CodeUnavailable                   Code = "unavailable"
	CodeUnknownParameter              Code = "unknown_parameter"
	CodeUnprocessable                 Code = "unprocessable"
	CodeUpstreamError                 Code = "upstream_error"
	CodeWebhooksDisabled              Code = "webhooks_disabled"
)

// The codes that never reach a client as such.
const (
	CodeInvalidCORSOrigin    Code = "invalid_cors_origin"   // http.cors_origins lists an unusable origin (configuration, at start)
	CodeDumpCutShort         Code = "dump_cut_short"        // kerneld import: the dump ends mid-session
	CodeIdempotentReplay     Code = "idempotent_replay"     // a store found the run an idempotency key names; the kernel replays it
	CodeImagesUnsupported    Code = "images_unsupported"    // kerneld import: the destination store keeps no images
	CodeInvalidDump          Code = "invalid_dump"          // kerneld import: the dump does not parse
	CodeInvalidLeaseTTL      Code = "invalid_lease_ttl"     // the redis store's lease TTL is out of bounds (configuration, at start)
	CodeInvalidPostgresURL   Code = "invalid_postgres_url"  // store.postgres.url does not parse (configuration, at start)
	CodeInvalidRedisPrefix   Code = "invalid_redis_prefix"  // store.redis.prefix is unusable (configuration, at start)
	CodeInvalidRedisURL      Code = "invalid_redis_url"     // store.redis.url does not parse (configuration, at start)
	CodeLeaseHeld            Code = "lease_held"            // a session's lease is held by another replica; the kernel waits or hands over
	CodeLeaseLost            Code = "lease_lost"            // a replica lost a session's lease; its run is taken over
	CodeMissingAPIKey        Code = "missing_api_key"       // an agent's model has no API key; its agent is unavailable (agent_unavailable)
	CodeMixedSessions        Code = "mixed_sessions"        // a store batch held writes of several sessions (a kernel bug)
	CodeRunExists            Code = "run_exists"            // a run id is taken; the kernel replays or picks another
	CodeScheduleClaimLost    Code = "schedule_claim_lost"   // a schedule was claimed by another replica
	CodeSchedulesUnsupported Code = "schedules_unsupported" // kerneld import: the destination store keeps no schedules
	CodeSessionImported      Code = "session_imported"      // kerneld import: the session was imported from this dump already
	CodeStaleRecord          Code = "stale_record"          // a record changed since it was read; the kernel reads it again
)

// Answered lists every code a client may receive, in order.
var Answered = []Code{
	CodeAgentNotAllowed,
	CodeAgentNotFound,
	CodeAgentUnavailable,
	CodeApprovalDecided,
	CodeApprovalNotFound,
	CodeApprovalNotPending,
	CodeBodyTooLarge,
	CodeBodyTooSlow,
	CodeChatNotFound,
	CodeClientToolsDisabled,
	CodeConflict,
	CodeConsoleFileNotFound,
	CodeCursorAhead,
	CodeDeliveryNotFound,
	CodeDeliveryPending,
	CodeFeedUnavailable,
	CodeForbidden,
	CodeHistoryConflict,
	CodeIdempotencyKeyReused,
	CodeImageNotFound,
	CodeImageQuotaExceeded,
	CodeImagesNotKept,
	CodeInternal,
	CodeInterruptNotPending,
	CodeInvalidImage,
	CodeInvalidRequest,
	CodeInvalidTransition,
	CodeLimitExceeded,
	CodeMaxChildrenExceeded,
	CodeMaxDepthExceeded,
	CodeMCPServerNameTaken,
	CodeMemoryFull,
	CodeMemoryKeyNotFound,
	CodeMessageNotCompleted,
	CodeMessageNotFound,
	CodeMethodNotAllowed,
	CodeMetricsDisabled,
	CodeNotFound,
	CodeOpenAPIUnavailable,
	CodeOperatorKeyRequired,
	CodeOriginNotAllowed,
	CodeOverrideNotAllowed,
	CodeParentNotFound,
	CodePermissionModeNotAllowed,
	CodeQueueFull,
	CodeQuotaExceeded,
	CodeRateLimited,
	CodeRequestTimeout,
	CodeRouteNotFound,
	CodeRunNotFound,
	CodeRunNotRegenerable,
	CodeRunNotWaiting,
	CodeScheduleExists,
	CodeScheduleLimit,
	CodeScheduleNotFound,
	CodeSchedulesUnavailable,
	CodeSessionBusy,
	CodeSessionClosed,
	CodeSessionExists,
	CodeSessionHasChildren,
	CodeSessionNotFound,
	CodeSessionRunning,
	CodeShuttingDown,
	CodeStarting,
	CodeStorageUnavailable,
	CodeStoreClosed,
	CodeStoreUnavailable,
	CodeStreamsUnavailable,
	CodeTenantKeyRequired,
	CodeTimeout,
	CodeTooManyConnections,
	CodeTooManyConnectionsFromAddress,
	CodeTooManyStreams,
	CodeUnansweredToolCalls,
	CodeUnauthorized,
	CodeUnavailable,
	CodeUnknownParameter,
	CodeUnprocessable,
	CodeUpstreamError,
	CodeWebhooksDisabled,
}

// Internal lists the codes that never reach a client as such.
var Internal = []Code{
	CodeDumpCutShort,
	CodeIdempotentReplay,
	CodeImagesUnsupported,
	CodeInvalidCORSOrigin,
	CodeInvalidDump,
	CodeInvalidLeaseTTL,
	CodeInvalidPostgresURL,
	CodeInvalidRedisPrefix,
	CodeInvalidRedisURL,
	CodeLeaseHeld,
	CodeLeaseLost,
	CodeMissingAPIKey,
	CodeMixedSessions,
	CodeRunExists,
	CodeScheduleClaimLost,
	CodeSchedulesUnsupported,
	CodeSessionImported,
	CodeStaleRecord,
}

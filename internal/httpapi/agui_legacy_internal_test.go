package httpapi

import "testing"

func TestLegacyClient(t *testing.T) {
	for version, want := range map[string]bool{"1.0": false, "1.2": false, "2.0": false, "0.0.59": true, "0.1": true, "": true, "one": true} {
		if got := legacyClient(&version); got != want {
			t.Errorf("legacyClient(%q) = %v, want %v", version, got, want)
		}
	}
	if !legacyClient(nil) {
		t.Error("a client that declares no version is not taken for a legacy one")
	}
}

func TestLegacyRunEnd(t *testing.T) {
	const meta = `"timestamp":1,"metadata":{"kerneld":{"sessionId":"s","runId":"r","reason":"cancelled"}}}`
	tests := []struct{ name, in, want string }{
		{"pending client calls",
			"id: 9\nevent: RUN_FINISHED\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"s\",\"runId\":\"r\",\"outcome\":{\"type\":\"success\",\"pendingToolCallIds\":[\"c1\",\"c2\"]}," + meta + "\n\n",
			"id: 9\nevent: RUN_FINISHED\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"s\",\"runId\":\"r\",\"outcome\":{\"type\":\"success\"}," + meta + "\n\n"},
		{"cancelled",
			"id: 9\nevent: RUN_FINISHED\ndata: {\"type\":\"RUN_FINISHED\",\"threadId\":\"s\",\"runId\":\"r\",\"outcome\":{\"type\":\"cancelled\"},\"usage\":[]," + meta + "\n\n",
			"id: 9\nevent: RUN_ERROR\ndata: {\"code\":\"cancelled\",\"message\":\"the run was cancelled\",\"metadata\":{\"kerneld\":{\"sessionId\":\"s\",\"runId\":\"r\",\"reason\":\"cancelled\"}},\"timestamp\":1,\"type\":\"RUN_ERROR\",\"usage\":[]}\n\n"},
		{"success", "id: 9\nevent: RUN_FINISHED\ndata: {\"outcome\":{\"type\":\"success\"}}\n\n", "id: 9\nevent: RUN_FINISHED\ndata: {\"outcome\":{\"type\":\"success\"}}\n\n"},
	}
	for _, tt := range tests {
		if got := string(legacyRunEnd([]byte(tt.in))); got != tt.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

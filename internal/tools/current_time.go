package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// CurrentTime reports the current time, optionally in an IANA time zone.
type CurrentTime struct {
	Now func() time.Time
}

var currentTimeSchema = schema(map[string]any{
	"timezone": map[string]any{"type": "string", "description": "IANA time zone, e.g. Europe/Paris; default UTC"},
})

// Definition implements Tool.
func (CurrentTime) Definition() Definition {
	return Definition{
		Name:        "current_time",
		Description: "Returns the current date and time in RFC 3339 format.",
		Parameters:  currentTimeSchema,
		RetrySafe:   true, // it only reads the clock
		ReadOnly:    true,
	}
}

// Call implements Tool.
func (t CurrentTime) Call(_ context.Context, call Call) (string, error) {
	var args struct {
		Timezone string `json:"timezone"`
	}
	if err := decodeArgs(call.Arguments, &args); err != nil {
		return "", err
	}
	loc := time.UTC
	if args.Timezone != "" {
		var err error
		if loc, err = time.LoadLocation(args.Timezone); err != nil {
			return "", fmt.Errorf("unknown timezone %q", args.Timezone)
		}
	}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	out, err := json.Marshal(map[string]string{"time": now().In(loc).Format(time.RFC3339), "timezone": loc.String()})
	return string(out), err
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kerneld/kerneld/client"
)

// watchSessions handles "kerneld sessions --watch": the sessions as they
// are, then one line per change from the session feed, as a sidebar
// would redraw them, until Ctrl-C.
func (c *cli) watchSessions(agent string) error {
	feed, err := c.c.WatchSessions(c.ctx, client.FeedOptions{Agent: agent, Snapshot: true, MaxRetries: -1})
	if err != nil {
		return err
	}
	defer feed.Close()
	for {
		ev, err := feed.Next()
		if err != nil {
			if c.ctx.Err() != nil || errors.Is(err, client.ErrStreamClosed) {
				return nil // Ctrl-C: the normal end
			}
			return err
		}
		if err := c.printFeedEvent(ev); err != nil {
			return err
		}
	}
}

// printFeedEvent prints one feed event: with --json as it came, one per
// line; else a line per session.
func (c *cli) printFeedEvent(ev client.FeedEvent) error {
	if c.json {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "%s\n", b)
		return err
	}
	if ev.Type == client.FeedSnapshot {
		for _, s := range ev.Sessions {
			if err := c.printSummary("now", s.UpdatedAt, s); err != nil {
				return err
			}
		}
		return nil
	}
	return c.printSummary(ev.Type, ev.Time, ev.Session)
}

// printSummary prints "TIME  WHAT  ID  AGENT  STATUS  [badges]  TITLE".
func (c *cli) printSummary(what string, at time.Time, s client.SessionSummary) error {
	var badges []string
	if s.PendingApprovals > 0 {
		badges = append(badges, fmt.Sprintf("%d to approve", s.PendingApprovals))
	}
	if s.Unread > 0 {
		badges = append(badges, fmt.Sprintf("%d unread", s.Unread))
	}
	title := s.Title
	if title == "" {
		title = s.Name
	}
	line := fmt.Sprintf("%s  %-18s  %s  %s  %s", at.Local().Format(time.TimeOnly), what, s.ID, s.Agent, s.Status)
	if len(badges) > 0 {
		line += "  [" + strings.Join(badges, ", ") + "]"
	}
	if title != "" {
		line += "  " + title
	}
	_, err := fmt.Fprintln(c.stdout, line)
	return err
}

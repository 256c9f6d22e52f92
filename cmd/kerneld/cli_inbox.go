package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/kerneld/kerneld/client"
)

// inbox handles "kerneld inbox": the approvals waiting across the
// caller's sessions, each with the command that decides it.
func (c *cli) inbox(args []string) error {
	var page client.Page
	agent := c.fs.String("agent", "", "only this agent's sessions")
	c.fs.IntVar(&page.Limit, "limit", 0, "at most this many approvals")
	c.fs.StringVar(&page.Cursor, "cursor", "", "the page after this cursor")
	if _, err := c.parse(args, 0, "inbox [--agent A] [--limit N] [--cursor C]"); err != nil {
		return err
	}
	p, err := c.c.Inbox(c.ctx, *agent, page)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(p)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0) // buffers: Flush reports a failed write
	_, _ = fmt.Fprintln(tw, "SESSION\tAGENT\tTOOL\tARGUMENTS\tEXPIRES\tDECIDE WITH")
	for _, it := range p.Data {
		expires := "-"
		if it.ExpiresAt != nil {
			expires = it.ExpiresAt.Local().Format(time.DateTime)
		}
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\tkerneld approve %s %s %s\n", it.SessionID, it.Agent, it.ToolName,
			it.Arguments, expires, it.SessionID, it.RunID, it.ToolCallID)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.NextCursor != "" {
		c.note("more: --cursor", p.NextCursor)
	}
	return nil
}

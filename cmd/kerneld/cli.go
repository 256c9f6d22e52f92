package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/kerneld/kerneld/client"
)

// The client subcommands: kerneld as a terminal client of a running
// kerneld, through the client package. Each gets the remaining arguments.
var cliCommands = map[string]func(*cli, []string) error{
	"agents":   (*cli).agents,
	"sessions": (*cli).sessions,
	"run":      (*cli).run,
	"chat":     (*cli).chat,
	"watch":    (*cli).watch,
	"approve":  (*cli).approve,
	"inbox":    (*cli).inbox,
	"read":     (*cli).read,
	"state":    (*cli).state,
	"clear":    (*cli).clear,
}

// cliIO is what a command reads and writes, passed in so tests can
// drive it.
type cliIO struct {
	getenv         func(string) string
	stdin          io.Reader
	stdout, stderr io.Writer
	// interactive is true when stdin is a terminal: chat prompts.
	interactive bool
	// interrupts receives Ctrl-C (SIGINT), for chat.
	interrupts <-chan os.Signal
}

// cli is one command being run.
type cli struct {
	cliIO
	ctx  context.Context
	c    *client.Client
	fs   *flag.FlagSet
	url  string
	key  string
	json bool
	// instructions are a new session's own (run, chat --instructions).
	instructions string
}

// cliMain runs a client subcommand with the process's stdin and signals.
// chat handles Ctrl-C itself; for the other commands it ends the command.
func cliMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	interrupts := make(chan os.Signal, 2)
	if args[0] == "chat" {
		signal.Notify(interrupts, os.Interrupt)
		defer signal.Stop(interrupts)
	} else {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt)
		defer stop()
	}
	st, err := os.Stdin.Stat()
	interactive := err == nil && st.Mode()&os.ModeCharDevice != 0
	return runCLI(ctx, args, cliIO{getenv: getenv, stdin: os.Stdin, stdout: stdout, stderr: stderr,
		interactive: interactive, interrupts: interrupts})
}

// runCLI runs the client subcommand args[0].
func runCLI(ctx context.Context, args []string, cio cliIO) error {
	cmd, ok := cliCommands[args[0]]
	if !ok {
		_, err := fmt.Fprint(cio.stdout, cliUsage)
		return err
	}
	c := &cli{cliIO: cio, ctx: ctx, fs: flag.NewFlagSet("kerneld "+args[0], flag.ContinueOnError)}
	c.fs.SetOutput(cio.stderr)
	c.fs.Usage = func() { _, _ = fmt.Fprint(cio.stderr, cliUsage) } // help text: nothing to do if stderr fails
	c.fs.StringVar(&c.url, "url", envOr(cio.getenv, "KERNELD_URL", client.DefaultURL), "kerneld's address (KERNELD_URL)")
	c.fs.StringVar(&c.key, "api-key", cio.getenv("KERNELD_API_KEY"), "API key (KERNELD_API_KEY)")
	c.fs.BoolVar(&c.json, "json", false, "print JSON")
	err := cmd(c, args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no kerneld answers at %s: start one (make run), or point --url or KERNELD_URL at one: %w", c.url, err)
	}
	return err
}

// parse parses the command's flags, which may come before, between or
// after its arguments, connects the client and returns the arguments,
// which must number want.
func (c *cli) parse(args []string, want int, usage string) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, err
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != want {
		return nil, fmt.Errorf("usage: kerneld %s", usage)
	}
	opts := []client.Option{}
	if c.key != "" {
		opts = append(opts, client.WithAPIKey(c.key))
	}
	cl, err := client.New(c.url, opts...)
	if err != nil {
		return nil, err
	}
	c.c = cl
	return pos, nil
}

// note tells the person something on stderr: the session's id, how a
// run failed. Nothing is to be done if stderr cannot be written.
func (c *cli) note(args ...any) { _, _ = fmt.Fprintln(c.stderr, args...) }

// prompt invites the next line of a chat.
func (c *cli) prompt() { _, _ = fmt.Fprint(c.stderr, "> ") }

// printJSON prints v indented.
func (c *cli) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s\n", b)
	return err
}

// agents handles "kerneld agents".
func (c *cli) agents(args []string) error {
	if _, err := c.parse(args, 0, "agents"); err != nil {
		return err
	}
	agents, err := c.c.ListAgents(c.ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(agents)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0) // buffers: Flush reports a failed write
	_, _ = fmt.Fprintln(tw, "NAME\tAVAILABLE\tDESCRIPTION")
	for _, a := range agents {
		desc := a.Description
		if !a.Available {
			desc = "(" + a.UnavailableReason + ") " + desc
		}
		_, _ = fmt.Fprintf(tw, "%s\t%t\t%s\n", a.Name, a.Available, desc)
	}
	return tw.Flush()
}

// sessions handles "kerneld sessions [ls|get|rm]".
func (c *cli) sessions(args []string) error {
	sub := "ls"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "ls", "list":
		return c.sessionList(args)
	case "get":
		pos, err := c.parse(args, 1, "sessions get SESSION")
		if err != nil {
			return err
		}
		s, err := c.c.GetSession(c.ctx, pos[0])
		if err != nil {
			return err
		}
		return c.printJSON(s)
	case "rm", "delete":
		cascade := c.fs.Bool("cascade", false, "delete the session's children too")
		pos, err := c.parse(args, 1, "sessions rm SESSION [--cascade]")
		if err != nil {
			return err
		}
		if err := c.c.DeleteSession(c.ctx, pos[0], *cascade); err != nil {
			return err
		}
		_, err = fmt.Fprintln(c.stdout, "deleted", pos[0])
		return err
	case "instructions":
		return c.sessionInstructions(args)
	}
	return fmt.Errorf("sessions: unknown subcommand %q (ls, get, rm, instructions)", sub)
}

// sessionInstructions handles "kerneld sessions instructions SESSION
// TEXT": it sets the session's own instructions; "" clears them.
func (c *cli) sessionInstructions(args []string) error {
	pos, err := c.parse(args, 2, `sessions instructions SESSION "text" ("" clears them)`)
	if err != nil {
		return err
	}
	s, err := c.c.UpdateSession(c.ctx, pos[0], client.UpdateSessionRequest{Instructions: &pos[1]})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(s)
	}
	if s.Instructions == "" {
		_, err = fmt.Fprintln(c.stdout, s.ID, "has no instructions of its own")
		return err
	}
	_, err = fmt.Fprintf(c.stdout, "%s instructions: %s\n", s.ID, s.Instructions)
	return err
}

// sessionList handles "kerneld sessions ls".
func (c *cli) sessionList(args []string) error {
	var opts client.ListSessionsOptions
	c.fs.StringVar(&opts.Agent, "agent", "", "only this agent's sessions")
	c.fs.StringVar(&opts.State, "state", "", "only sessions in this state")
	c.fs.IntVar(&opts.Limit, "limit", 0, "at most this many sessions")
	c.fs.StringVar(&opts.Cursor, "cursor", "", "the page after this cursor")
	watch := c.fs.Bool("watch", false, "print the sessions, then each change to them as it happens")
	if _, err := c.parse(args, 0, "sessions ls [--agent A] [--state S] [--limit N] [--cursor C] [--watch]"); err != nil {
		return err
	}
	if *watch {
		return c.watchSessions(opts.Agent)
	}
	page, err := c.c.ListSessions(c.ctx, opts)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(page)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0) // buffers: Flush reports a failed write
	_, _ = fmt.Fprintln(tw, "ID\tAGENT\tSTATE\tUPDATED\tUNREAD\tTITLE")
	for _, s := range page.Data {
		title := cmp.Or(s.Title, s.Name)
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.ID, s.Agent, s.State, s.UpdatedAt.Local().Format(time.DateTime), s.Unread, title)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		c.note("more: --cursor", page.NextCursor)
	}
	return nil
}

// read handles "kerneld read SESSION [--seq SEQ]": it marks the session
// read, up to SEQ or everything so far.
func (c *cli) read(args []string) error {
	seq := c.fs.Int64("seq", 0, "read up to this seq (default: everything so far)")
	pos, err := c.parse(args, 1, "read SESSION [--seq SEQ]")
	if err != nil {
		return err
	}
	s, err := c.c.MarkRead(c.ctx, pos[0], *seq)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(s)
	}
	_, err = fmt.Fprintf(c.stdout, "%s read up to seq %d of %d, %d unread\n", s.ID, s.ReadSeq, s.LastSeq, s.Unread)
	return err
}

// state handles "kerneld state SESSION [--set JSON]": it prints the
// session's app state, after replacing it with --set.
func (c *cli) state(args []string) error {
	set := c.fs.String("set", "", "replace the state with this JSON value")
	pos, err := c.parse(args, 1, "state SESSION [--set JSON]")
	if err != nil {
		return err
	}
	var state json.RawMessage
	if isFlagSet(c.fs, "set") {
		if !json.Valid([]byte(*set)) {
			return fmt.Errorf("--set: %q is not a JSON value", *set)
		}
		state, err = c.c.PutState(c.ctx, pos[0], json.RawMessage(*set))
	} else {
		state, err = c.c.GetState(c.ctx, pos[0])
	}
	if err != nil {
		return err
	}
	return c.printJSON(state)
}

// approve handles "kerneld approve SESSION RUN CALL [--deny reason]".
func (c *cli) approve(args []string) error {
	deny := c.fs.String("deny", "", "deny the call, with this reason")
	always := c.fs.Bool("always", false, "approve the tool's later calls in the session too")
	same := c.fs.Bool("same-arguments", false, "with --always, only its later calls with the same arguments")
	pos, err := c.parse(args, 3, "approve SESSION RUN CALL [--deny REASON | --always [--same-arguments]]")
	if err != nil {
		return err
	}
	d := client.Decision{Decision: client.Approve}
	switch {
	case isFlagSet(c.fs, "deny"):
		d = client.Decision{Decision: client.Deny, Reason: *deny}
	case *always:
		d = client.Decision{Decision: client.Always, SameArguments: *same}
	}
	a, err := c.c.DecideApproval(c.ctx, pos[0], pos[1], pos[2], d)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(a)
	}
	_, err = fmt.Fprintf(c.stdout, "%s %s (call %s)\n", a.State, a.ToolName, a.ToolCallID)
	return err
}

// isFlagSet reports whether the flag name was given.
func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// watch handles "kerneld watch SESSION": it follows the session until it
// is closed or deleted, or Ctrl-C.
func (c *cli) watch(args []string) error {
	after := c.fs.Int64("after", 0, "start after this seq")
	snapshot := c.fs.Bool("snapshot", false, "start from a snapshot of the conversation")
	pos, err := c.parse(args, 1, "watch SESSION [--after SEQ] [--snapshot]")
	if err != nil {
		return err
	}
	stream, err := c.c.Follow(c.ctx, pos[0], client.FollowOptions{After: *after, Snapshot: *snapshot})
	if err != nil {
		return err
	}
	defer stream.Close()
	p := c.printer(true)
	for ev, err := range stream.All() {
		if err != nil {
			if c.ctx.Err() != nil {
				return nil // Ctrl-C
			}
			return err
		}
		if err := p.print(ev); err != nil {
			return err
		}
		if ev.Type == client.RunErrorType {
			c.note(runFailedError{ev})
		}
	}
	c.note("the session has ended")
	return nil
}

// clear handles "kerneld clear SESSION [--memory]": it empties the
// session's conversation in place, keeping its memory unless asked.
func (c *cli) clear(args []string) error {
	memory := c.fs.Bool("memory", false, "clear the session's memory too")
	pos, err := c.parse(args, 1, "clear SESSION [--memory]")
	if err != nil {
		return err
	}
	out, err := c.c.ClearSession(c.ctx, pos[0], *memory)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(out)
	}
	if out.Entry == nil {
		msg := "the clear did not complete"
		if out.Run.Error != nil {
			msg += ": " + out.Run.Error.Message
		}
		return errors.New(msg)
	}
	kept := "memory kept"
	if *memory {
		kept = "memory cleared"
	}
	_, err = fmt.Fprintf(c.stdout, "cleared %s (%s)\n", pos[0], kept)
	return err
}

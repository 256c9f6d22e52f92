package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/kerneld/kerneld/client"
)

// cliCommandsHelp lists the client commands, for both usages.
const cliCommandsHelp = `  agents                          list the agents
  sessions [ls] [--agent A] [--state S] [--limit N] [--cursor C]
  sessions --watch [--agent A]    print the sessions, then each change to them
                                  (status, title, approvals, unread) as it happens
  sessions get SESSION            print a session as JSON
  sessions rm SESSION [--cascade] delete a session
  sessions instructions SESSION "text"
                                  set a session's own instructions ("" clears)
  run AGENT "input" [--instructions TEXT]
                                  run input in a new session, print the answer
  chat AGENT [--instructions TEXT]
                                  talk with an agent, one line per input;
                                  answer its approvals with ` + approvalChoices + `;
                                  Ctrl-C cancels an answer, twice exits
  watch SESSION [--after SEQ] [--snapshot]
                                  follow a session's events
  approve SESSION RUN CALL [--deny REASON | --always [--same-arguments]]
                                  approve (or deny) a tool call; --always
                                  approves the tool for the rest of the session
  inbox [--agent A]               the approvals waiting across your sessions
  read SESSION [--seq SEQ]        mark a session read (up to SEQ, default all)
  state SESSION [--set JSON]      print (or replace) a session's app state
  clear SESSION [--memory]        empty a session's conversation in place
                                  (its memory too with --memory)
  version                         print the version
`

// cliFlagsHelp lists the flags every client command takes.
const cliFlagsHelp = `  --url URL       kerneld's address (KERNELD_URL, default ` + client.DefaultURL + `)
  --api-key KEY   API key (KERNELD_API_KEY)
  --json          print JSON: raw events, one per line, for scripts
`

const cliUsage = `Usage: kerneld COMMAND [flags]

Without a command (or with flags only) kerneld runs the server. Commands
talk to a running kerneld:

` + cliCommandsHelp + `
Flags of every command, before or after it:
` + cliFlagsHelp

// serverUsage is what kerneld --help prints: how to run the server, its
// flags, and the client commands, which a newcomer looks for here first.
func serverUsage(fs *flag.FlagSet) {
	w := fs.Output()
	_, _ = fmt.Fprint(w, `Usage: kerneld [flags]           run the server (flags below)
       kerneld COMMAND [flags]   talk to a running kerneld (commands below)

Server flags:
`) // help text: nothing to do if stderr fails
	fs.PrintDefaults()
	_, _ = fmt.Fprint(w, "\nCommands (kerneld help for more):\n"+cliCommandsHelp+"\nFlags of every command:\n"+cliFlagsHelp)
}

// clientCommand reports whether args run a client command, and returns
// them with the command first. The command's own flags may come before it
// (kerneld --url URL agents): they are the client's, not the server's.
func clientCommand(args []string) ([]string, bool) {
	for i := 0; i < len(args); i++ {
		if isCLICommand(args[i:]) {
			cmd := append([]string{args[i]}, args[:i]...)
			return append(cmd, args[i+1:]...), true
		}
		switch name, value, _ := strings.Cut(strings.TrimLeft(args[i], "-"), "="); {
		case !strings.HasPrefix(args[i], "-"):
			return nil, false
		case name == "url" || name == "api-key":
			if value == "" && !strings.Contains(args[i], "=") {
				i++ // the flag's value is the next argument
			}
		case name != "json":
			return nil, false // a server flag: the server's arguments
		}
	}
	return nil, false
}

// isCLICommand reports whether args name a client subcommand.
func isCLICommand(args []string) bool {
	if len(args) == 0 {
		return false
	}
	_, ok := cliCommands[args[0]]
	return ok || args[0] == "help"
}

// unexpectedArgument is the server's refusal of a positional argument.
// A client command after server flags is the likely mistake: say so.
func unexpectedArgument(arg string) error {
	if isCLICommand([]string{arg}) {
		return fmt.Errorf("%q is a client command, but a server flag comes before it: "+
			"a command takes only --url, --api-key and --json, before or after it (kerneld help)", arg)
	}
	return fmt.Errorf("unexpected argument %q (kerneld --help lists the flags and commands)", arg)
}

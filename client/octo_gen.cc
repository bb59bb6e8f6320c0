// octo-gen: generate text through octod (see gen_command.h for the modes
// and the --json format).
//
//   octo-gen [--socket PATH | --host HOST:PORT --token-file FILE]
//            [--model NAME] [sampling flags] [--json] [--stats] [--session ID] "prompt"|-
//   octo-gen --chat [--system TEXT] [--chat-template NAME] [--context N] ["message"]
//   octo-gen --embed [--dimensions N] [--raw] [--json] "text"|-
//
// Ctrl-C cancels the generation (octod stops it at once) and exits 130; in a
// conversation on a terminal it stops the reply, and at the prompt it exits.
// Exit codes: 0 done, 1 an error, 2 bad flags, 130 cancelled.
#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "client/command_line.h"
#include "client/gen_command.h"
#include "client/interruptible_input.h"

int main(int argc, char** argv) {
  // SIGINT/SIGTERM go to the watcher thread below (blocked everywhere else,
  // including the threads gRPC starts later).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  CLI::App app{"octo-gen: generate text with octod"};
  octo::UseOctoConventions(app, "octo-gen");
  octo::GenFlags flags;
  app.add_option("prompt", flags.prompt, "Prompt text (\"-\": read it from stdin); with --chat, one message");
  app.add_flag("--chat", flags.chat, "Chat: a conversation from stdin lines, or one turn with a message");
  app.add_option("--system", flags.system, "System message (with --chat)");
  app.add_option("--chat-template", flags.chat_template, "Template family instead of the model's (chatml, llama3, ...)");
  app.add_option("--model,-m", flags.model,
                 "Model to run (a name under octod's models root); octod loads it beside its others when needed");
  app.add_option("--grammar", flags.grammar_file,
                 "Hold the output to the GBNF grammar in FILE (llama.cpp's format; the rule root first)");
  app.add_option("--json-schema", flags.json_schema_file,
                 "Hold the output to the JSON Schema in FILE (the keywords of daemon/grammar/json_schema.h)");
  app.add_option("--session", flags.session,
                 "Use this named session, opened on first use and kept after the run (its cache keeps earlier "
                 "turns), or a session id");
  app.add_option("--context", flags.context, "Positions of the session --chat opens (0: octod's default)");
  app.add_flag("--json", flags.json, "JSON Lines: started, each token, done (with the whole text and stats)");
  app.add_flag("--stats", flags.stats,
               "Print tokens/s, prompt tokens, loader wait vs compute time (and a draft's acceptance) to stderr");
  app.add_option("--draft-model", flags.draft_model,
                 "Speculative decoding with this draft model (relative to octod's models root; none: off; "
                 "default: octod's --draft-model)");
  app.add_option("--draft-max", flags.draft_max, "The most tokens a draft proposes per pass (default: octod's)");
  app.add_flag("--embed", flags.embed,
               "Print the prompt's embedding (a JSON array); with \"-\", one per non-empty stdin line");
  app.add_option("--dimensions", flags.dimensions, "With --embed: keep the first N values (0: all)");
  app.add_flag("--raw", flags.raw, "With --embed: the pooled vector as it is, not scaled to unit length");
  octo::AddSamplingFlags(&app, &flags.sampling);
  octo::AddConnectFlags(&app, &flags.connect);
  if (const std::optional<int> exit_code = octo::ParseCommandLine(app, argc, argv)) return *exit_code;
  if (absl::Status valid = octo::CheckGenFlags(flags); !valid.ok()) {
    std::fprintf(stderr, "octo-gen: %s\n", std::string(valid.message()).c_str());
    return 2;
  }
  flags.interactive = ::isatty(STDIN_FILENO) != 0;

  absl::StatusOr<std::unique_ptr<octo::OctoClient>> client = octo::OctoClient::Connect(flags.connect);
  if (!client.ok()) {
    std::fprintf(stderr, "octo-gen: %s\n", std::string(client.status().message()).c_str());
    return 1;
  }
  octo::InterruptibleInput input_buffer(STDIN_FILENO);
  std::istream input(&input_buffer);
  // Cancels the call in progress and ends input. Lives until the process
  // ends (blocked in sigwait when no signal came), so it may use the client
  // and the buffer, which main never destroys before exiting.
  octo::OctoClient* connection = client->get();
  // A conversation on a terminal: Ctrl-C during a reply stops that reply and
  // the prompt returns; Ctrl-C at the prompt (or anywhere else) ends octo-gen.
  const bool stop_replies = flags.chat && flags.prompt.empty() && flags.interactive;
  std::thread([connection, &input_buffer, stop_signals, stop_replies] {
    int signal_number = 0;
    do {
      sigwait(&stop_signals, &signal_number);
    } while (stop_replies && signal_number == SIGINT && connection->StopCall());
    connection->Cancel();
    input_buffer.Interrupt();
  }).detach();
  const int exit_code = octo::RunGen(flags, **client, input, stdout, stderr);
  std::fflush(stdout);
  std::_Exit(exit_code);  // the watcher thread may still hold references
}

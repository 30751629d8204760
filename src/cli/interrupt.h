// Ctrl-C for interactive commands (tandem chat): SIGINT only sets a flag, which the command
// polls — between tokens to stop the answer in progress, and in a read from the terminal,
// which it interrupts (no SA_RESTART) so the prompt can react. Not for serve, which waits for
// its signals with sigwaitinfo.
#pragma once

namespace tandem::cli {

// Installs the handler and blocks SIGINT in this thread, so threads started from here on
// inherit the block; then, once they are started, receive_interrupts_here() unblocks it in
// this thread alone: the signal always lands here, interrupting this thread's reads.
void catch_interrupts();
void receive_interrupts_here();

// Whether SIGINT arrived since the last call; clears the flag.
bool take_interrupt();

// Waits until `fd` can be read without blocking (data, end of file or an error to report) or a
// Ctrl-C comes, whichever is first; true when readable. A Ctrl-C that came before the call, or
// arrives while it checks the flag, is taken too: SIGINT stays blocked from the check until
// ppoll unblocks it atomically for the wait, so no signal falls between the two.
bool wait_readable_or_interrupt(int fd);

}  // namespace tandem::cli

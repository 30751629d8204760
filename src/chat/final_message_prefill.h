// Assistant prefill: a prompt that ends inside the conversation's last (assistant) message,
// so the model continues it instead of starting a new turn. A chat template only knows how
// to render closed turns, so the final message's content gets a marker appended, the
// conversation is rendered as usual (no generation prompt), and the text is cut where the
// marker landed: after the content, before whatever closes the turn. Works on any template
// that prints the content's end as is; knows nothing of particular templates.
#pragma once

#include <string>
#include <vector>

#include "chat/chat_format.h"
#include "chat/chat_message.h"

namespace tandem::chat {

// `messages` with the marker appended to the last message's content. Throws InputError when
// there is no message, the last is not the assistant's, or it calls tools (the calls would
// be cut off: there is no text to continue after them).
std::vector<ChatMessage> mark_final_message(const std::vector<ChatMessage>& messages);

// The render of marked messages cut before the marker (spans clipped to the cut). Throws
// InputError when the marker is not in the text exactly once (the template dropped,
// rewrote or repeated the final content, so there is no place to continue from).
RenderedChat cut_at_final_message(RenderedChat chat);
std::string cut_at_final_message(const std::string& text);

}  // namespace tandem::chat

// The chat page's files (src/server/web/: index.html, chat.css, chat.js, conversations.js,
// markdown.js) and Debian's marked.min.js, compiled into the binary by
// cmake/embed_web_assets.cmake so `tandem serve` needs nothing beside it and the page fetches
// nothing from elsewhere. Lookup only; the transport serves them.
#pragma once

#include <string_view>

namespace tandem::server {

struct WebAsset {
  std::string_view path;          // "/" for index.html, else "/chat.css", "/marked.min.js", ...
  std::string_view content_type;  // with charset
  std::string_view body;
};

// The asset at `path` (query string ignored), or null.
const WebAsset* find_web_asset(std::string_view path);

}  // namespace tandem::server

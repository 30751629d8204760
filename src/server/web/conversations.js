// The chat page's conversations, kept in this browser's localStorage (the server keeps none):
// a list of {id, title, updated, turns: [{role, content}], leftOut}, where leftOut counts the
// oldest turns no longer sent because the conversation outgrew the context (chat.js). One key
// holds them all, written whole after each change. No DOM here; chat.js draws them.
"use strict";

const conversationsKey = "tandem.conversations.v1";

// {current: id or null, list: [conversation, ...]}, newest first.
function loadConversations() {
  try {
    const stored = JSON.parse(localStorage.getItem(conversationsKey));
    if (stored && Array.isArray(stored.list)) {
      stored.list = stored.list.filter((item) => item && typeof item.id === "string" && Array.isArray(item.turns));
      return stored;
    }
  } catch (error) {
    // Unreadable (another version, or edited by hand): start afresh rather than fail the page.
  }
  return { current: null, list: [] };
}

// False when the browser refuses (storage full or disabled); the page then says so.
function saveConversations(store) {
  try {
    localStorage.setItem(conversationsKey, JSON.stringify(store));
    return true;
  } catch (error) {
    return false;
  }
}

function findConversation(store, id) {
  return store.list.find((conversation) => conversation.id === id) || null;
}

// A new conversation, first in the list and current; titled after its first message.
function createConversation(store, firstMessage) {
  const title = firstMessage.trim().replace(/\s+/g, " ");
  const conversation = {
    id: Date.now().toString(36) + Math.random().toString(36).slice(2, 8),
    title: title.length > 48 ? title.slice(0, 47) + "…" : title,
    updated: Date.now(),
    turns: [],
    leftOut: 0,
  };
  store.list.unshift(conversation);
  store.current = conversation.id;
  return conversation;
}

// Marks `conversation` changed: it moves to the top of the list (unless it was deleted).
function touchConversation(store, conversation) {
  if (!store.list.includes(conversation)) return;
  conversation.updated = Date.now();
  store.list = [conversation, ...store.list.filter((other) => other !== conversation)];
}

function deleteConversation(store, id) {
  store.list = store.list.filter((conversation) => conversation.id !== id);
  if (store.current === id) store.current = null;
}

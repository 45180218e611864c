/**
 * The translated routes (/v1/messages, /v1/responses) build a chat request from the fields they know;
 * `chat` gets the request's other fields as they came, unless the translation set them already (the
 * spec: unknown OpenAI-shape fields pass through to the upstream unchanged; a null is left out, as an
 * absent field). `known`: the route's
 * translated fields and those of its own with no chat counterpart, which go no further.
 */
export function passThrough(body: Record<string, unknown>, chat: Record<string, unknown>, known: Set<string>): Record<string, unknown> {
  for (const [k, v] of Object.entries(body)) if (!known.has(k) && !(k in chat) && v !== undefined && v !== null) chat[k] = v;
  return chat;
}

// Server-sent events read from a fetch response (POST /api/document, /api/translate_stream):
// EventSource itself only sends GET requests.

// Yields {event, data} for each server-sent event of a fetch response's body.
export async function* serverEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const fields = Object.fromEntries(block.split("\n").map((line) => {
        const colon = line.indexOf(":");
        return [line.slice(0, colon), line.slice(colon + 1).trimStart()];
      }));
      yield { event: fields.event, data: JSON.parse(fields.data) };
    }
  }
}

// t2t-serve's document panel: POST /api/document and show its server-sent events as they come,
// source and translation paragraphs side by side. Text is set as text, never as HTML: a
// document's tags are shown, not rendered.

import { serverEvents } from "./events.js";

const $ = (id) => document.getElementById(id);

// The search settings of the sentence form, where set (the API's defaults otherwise).
function settings() {
  const body = {};
  const numbers = [["beam_size", parseInt], ["alpha", parseFloat], ["patience", parseFloat],
    ["no_repeat_ngram_size", parseInt],
    ["repetition_penalty", parseFloat], ["min_length", parseInt]];
  for (const [id, parse] of numbers) {
    const value = parse($(id).value);
    if (!Number.isNaN(value)) body[id] = value;
  }
  body.disable_unk = $("disable_unk").checked;
  return body;
}

function showError(message) {
  $("document-error").hidden = !message;
  $("document-error").textContent = message || "";
}

async function translateDocument(event) {
  event.preventDefault();
  showError(null);
  const button = $("translate-document");
  button.disabled = true;
  $("document-status").textContent = "translating…";
  const rows = [];
  const done = [];
  try {
    const response = await fetch("/api/document", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text: $("document").value, ...settings() }),
    });
    if (!response.ok) {
      const answer = await response.json().catch(() => ({}));
      throw new Error(answer.error || `${response.status} ${response.statusText}`);
    }
    let total = 0, count = 0;
    for await (const { event: name, data } of serverEvents(response)) {
      if (name === "start") {
        total = data.sentences;
        const body = $("document-pairs").querySelector("tbody");
        body.replaceChildren();
        for (const paragraph of data.paragraphs) {
          const tr = document.createElement("tr");
          const source = document.createElement("td");
          const target = document.createElement("td");
          source.textContent = paragraph;
          target.className = "pending";
          tr.append(source, target);
          body.append(tr);
          rows.push(target);
          done.push([]);
        }
        $("document-pairs").hidden = false;
      } else if (name === "sentence") {
        count += 1;
        done[data.paragraph].push(data.translation);
        rows[data.paragraph].textContent = done[data.paragraph].join(" ");
        $("document-status").textContent = `${count} of ${total} sentences`;
      } else if (name === "paragraph") {
        rows[data.paragraph].textContent = data.text;
        rows[data.paragraph].className = "done";
      } else if (name === "done") {
        $("document-status").textContent = `done: ${total} sentences`;
        $("document-pairs").dataset.document = data.document;
      } else if (name === "error") {
        throw new Error(data.error);
      }
    }
  } catch (error) {
    $("document-status").textContent = "";
    showError(error.message || String(error));
  } finally {
    button.disabled = false;
  }
}

$("document-form").addEventListener("submit", translateDocument);

// t2t-serve's page: translate, unfold n-best lists, look at attention, draw and score trees.
// Everything comes from the JSON API (/docs describes it); errors are shown where they happen.

import { drawTree, heatmap, weightColor } from "./draw.js";
import { serverEvents } from "./events.js";

const $ = (id) => document.getElementById(id);
const state = { info: null, settings: null, attention: null, target: 0 };

function element(tag, className = "", text = null) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== null) node.textContent = text;
  return node;
}

// POSTs body as JSON; resolves to the answer's JSON, or throws {message, field} for a 4xx/5xx.
async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw { message: answer.error || `${response.status} ${response.statusText}`, field: answer.field };
  }
  return answer;
}

// Each error box outlines the field its error names, and clears only its own mark: an answer
// to another request (the attention of an earlier result) leaves the form's mark alone.
function showError(box, error) {
  const marked = box.dataset.field ? $(box.dataset.field) : null;
  if (marked) marked.classList.remove("invalid");
  delete box.dataset.field;
  if (!error) {
    box.hidden = true;
    box.textContent = "";
    return;
  }
  box.hidden = false;
  box.textContent = error.message || String(error);
  const field = (error.field || "").replace(/\[.*$/, "");
  if (!$(field)) return;
  $(field).classList.add("invalid");
  box.dataset.field = field;
}

const format = {
  parameters: (n) => Number(n).toLocaleString("en-US"),
  // The settings a user can read a search by; sampling and limits stay in the API's answer.
  settings: (s) => ["beam_size", "alpha", "patience", "extra_length", "constrained"]
    .filter((k) => k in s).map((k) => `${k} ${s[k]}`).join(", "),
};

function showFacts(facts) {
  const rows = [
    ["problem", facts.problem], ["hparams set", facts.hparams_set], ["step", facts.step],
    ["checkpoint", facts.checkpoint], ["vocabulary", facts.vocab_size],
    ["parameters", facts.parameters === undefined ? undefined : format.parameters(facts.parameters)],
    ["run", facts.output_dir], ["SavedModel", facts.saved_model],
    ["search defaults", facts.settings ? format.settings(facts.settings) : undefined],
  ];
  const table = $("facts");
  table.replaceChildren();
  for (const [name, value] of rows) {
    if (value === undefined || value === null) continue;
    const tr = element("tr");
    tr.append(element("th", "", name), element("td", "", String(value)));
    table.append(tr);
  }
  $("title").textContent = `${facts.problem} · ${facts.hparams_set}`;
}

async function loadInfo() {
  try {
    const response = await fetch("/api/info");
    state.info = await response.json();
  } catch (error) {
    showError($("info-error"), { message: `cannot reach the server: ${error}` });
    return;
  }
  const { capabilities, facts } = state.info;
  const defaults = capabilities.defaults;
  $("beam_size").value = defaults.beam_size;
  $("alpha").value = defaults.alpha;
  $("patience").value = defaults.patience ?? 0;
  $("nbest").value = Math.min(defaults.beam_size, capabilities.max_nbest || defaults.beam_size, 4);
  for (const id of ["beam_size", "alpha", "patience"]) $(id).disabled = capabilities.search_fixed;
  $("sample").disabled = $("sampling").disabled = capabilities.search_fixed;
  for (const id of CONTROLS) $(id).disabled = capabilities.controls_nbest === 0;
  $("no_repeat_ngram_size").value = defaults.no_repeat_ngram_size ?? 0;
  $("repetition_penalty").value = defaults.repetition_penalty ?? 1;
  $("min_length").value = defaults.min_length ?? 0;
  $("disable_unk").checked = Boolean(defaults.disable_unk);
  const guided = capabilities.guided_nbest !== 0;
  $("prefix").disabled = $("terms").disabled = $("details").disabled = !guided;
  $("fixed-note").hidden = !capabilities.search_fixed;
  showFacts(facts);
  $("translate").disabled = false;
}

// The repetition and length controls (docs/control.md), sent with every search.
const CONTROLS = ["no_repeat_ngram_size", "repetition_penalty", "min_length", "disable_unk"];

function numberOrNull(id) {
  const value = $(id).value.trim();
  return value === "" ? null : Number(value);
}

function currentSettings() {
  const settings = {};
  for (const id of ["beam_size", "alpha", "patience", "nbest"]) settings[id] = numberOrNull(id);
  for (const id of CONTROLS.slice(0, 3)) settings[id] = numberOrNull(id);
  settings.disable_unk = $("disable_unk").checked;
  if ($("sample").checked) {
    settings.sampling = $("sampling").value.trim();  // "" samples at temperature 1
    settings.nbest = 1;  // one sample a sentence
  }
  return settings;
}

// The prefix and terms apply to every sentence; any of them (or the checkbox) asks for details.
function currentGuides(count) {
  const prefix = $("prefix").value.trim();
  const terms = $("terms").value.split(";").map((t) => t.trim()).filter((t) => t);
  const guides = { details: $("details").checked || Boolean(prefix) || terms.length > 0 };
  if (prefix) guides.prefixes = Array(count).fill(prefix);
  if (terms.length) guides.constraints = Array(count).fill(terms);
  return guides;
}

// One sentence searched greedily (beam size 1, any alpha) on a run streams token by token; other
// searches come whole from /api/translate (a beam's best can change until the search ends).
function streams(sentences, settings, guides) {
  const caps = state.info.capabilities;
  const beam = settings.beam_size ?? caps.defaults.beam_size;
  return Boolean(caps.streams) && sentences.length === 1 && !guides.details
    && settings.sampling === undefined && beam === 1 && (settings.nbest ?? 1) === 1;
}

// POST /api/translate_stream: the translation grows in its card as tokens arrive; resolves
// to the results as /api/translate gives them, or throws {message, field} as `post` does.
async function streamSentence(sentence, settings) {
  const response = await fetch("/api/translate_stream", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ sentence, ...settings }),
  });
  if (!response.ok) {
    const answer = await response.json().catch(() => ({}));
    throw { message: answer.error || `${response.status} ${response.statusText}`, field: answer.field };
  }
  const card = element("article", "result panel");
  const text = element("span", "hyp-text");
  card.append(element("div", "source", sentence), text);
  $("results").replaceChildren(card);
  const result = { source: sentence, truncated: false, hypotheses: [] };
  for await (const { event: name, data } of serverEvents(response)) {
    if (name === "start") result.truncated = data.truncated;
    else if (name === "text") text.textContent += data.text;
    else if (name === "done") result.hypotheses = [{ text: data.translation, score: data.score }];
    else if (name === "error") throw { message: data.error };
  }
  return [result];
}

async function translate(event) {
  event.preventDefault();
  const sentences = $("sentences").value.split("\n").map((s) => s.trim()).filter((s) => s);
  const settings = currentSettings();
  $("translate").disabled = true;
  $("status").textContent = "translating…";
  const guides = currentGuides(sentences.length);
  if (guides.details && state.info.capabilities.guided_nbest === 1) settings.nbest = 1;
  try {
    const results = streams(sentences, settings, guides)
      ? await streamSentence(sentences[0], settings)
      : (await post("/api/translate", { sentences, ...settings, ...guides })).results;
    showError($("error"), null);
    state.settings = settings;
    // The attention view searches without a prefix or terms, so it is offered without them only.
    state.guided = Boolean(guides.prefixes || guides.constraints);
    showResults(results);
    const first = results.findIndex((r) => r.hypotheses.length);
    $("attention-panel").hidden ||= state.guided;
    if (first >= 0 && state.info.capabilities.attention && !state.guided) selectResult(first, results[first].source);
  } catch (error) {
    showError($("error"), error);
  } finally {
    $("translate").disabled = false;
    $("status").textContent = "";
  }
}

// A hypothesis and its score, labelled: a beam's score is log p / lp(length), what it ranks by;
// a sample's is its log-probability.
function hypothesisLine(hypothesis) {
  const line = element("span");
  const sampled = state.settings && state.settings.sampling !== undefined;
  const score = element("span", "score", `${sampled ? "log p" : "score"} ${hypothesis.score.toFixed(4)}`);
  score.title = sampled ? "the sample's log-probability" : "log p / lp(length), what the beam ranks by";
  line.append(element("span", "hyp-text", hypothesis.text), score);
  return line;
}

function showResults(results) {
  const container = $("results");
  container.replaceChildren();
  results.forEach((result, index) => {
    const card = element("article", "result panel");
    card.dataset.index = index;
    const source = element("div", "source", result.source);
    if (result.truncated) source.append(element("span", "badge", "truncated to the model's positions"));
    card.append(source);
    const [best, ...rest] = result.hypotheses;
    const line = element("div", "best");
    line.append(best ? hypothesisLine(best) : element("span", "muted", "(empty input)"));
    if (best && state.info.capabilities.attention && !state.guided) {
      const button = element("button", "small show-attention", "attention");
      button.type = "button";
      button.addEventListener("click", () => selectResult(index, result.source));
      line.append(" ", button);
    }
    card.append(line);
    if (best && best.tokens) card.append(detailsPart(result.source, best));
    if (rest.length) card.append(nbestList(result.hypotheses));
    if (best && state.info.capabilities.parsing) card.append(...treeParts(best));
    container.append(card);
  });
}

// A hypothesis's details: its confidence, its tokens shaded by probability (those below 0.5
// marked), and its word alignment as source word -> target word pairs.
function detailsPart(source, hypothesis) {
  const part = element("div", "details");
  const confidence = element("span", "badge confidence", `confidence ${hypothesis.confidence.toFixed(2)}`);
  confidence.title = "calibrated sentence confidence (t2t-calibrate), in [0, 1]";
  const tokens = element("div", "tokens probs");
  hypothesis.tokens.forEach((label, i) => {
    const p = hypothesis.token_probs[i];
    const token = element("span", `token${p < 0.5 ? " low" : ""}`, label);
    token.title = `p = ${p.toFixed(3)}`;
    tokens.append(token);
  });
  const words = { source: source.split(/\s+/), target: hypothesis.text.split(/\s+/) };
  const pairs = element("div", "alignment");
  pairs.append(element("span", "muted", "alignment "));
  for (const pair of hypothesis.alignment.split(" ").filter((p) => p)) {
    const [i, j] = pair.split("-").map(Number);
    const chip = element("span", "pair", `${words.source[i] ?? i} → ${words.target[j] ?? j}`);
    chip.title = pair;
    pairs.append(chip);
  }
  part.append(confidence, tokens, pairs);
  return part;
}

function nbestList(hypotheses) {
  const details = element("details", "nbest");
  details.append(element("summary", "", `n-best (${hypotheses.length})`));
  const list = element("ol");
  for (const hypothesis of hypotheses) {
    const item = element("li");
    item.append(hypothesisLine(hypothesis));
    list.append(item);
  }
  details.append(list);
  return details;
}

// A parsing run's best output drawn as a tree, and a gold tree box scored with EVALB.
function treeParts(best) {
  const drawing = element("div", "tree");
  if (best.tree) drawTree(drawing, best.tree);
  else drawing.append(element("span", "muted", "(not a well-formed tree)"));
  const gold = element("details", "gold");
  gold.append(element("summary", "", "gold tree: EVALB F1"));
  const input = element("textarea", "gold-input");
  input.rows = 2;
  input.placeholder = "(ROOT (S (NP ...) (VP ...)))";
  const button = element("button", "small", "score");
  button.type = "button";
  const output = element("div", "evalb");
  const goldDrawing = element("div", "tree");
  button.addEventListener("click", async () => {
    output.replaceChildren();
    goldDrawing.replaceChildren();
    try {
      const r = await post("/api/evalb", { gold: input.value, test: best.text });
      const text = r.status === "ok"
        ? `F1 ${r.f1.toFixed(2)}  precision ${r.precision.toFixed(2)}  recall ${r.recall.toFixed(2)}  ` +
          `(${r.matched} of ${r.gold_brackets} gold brackets, ${r.test_brackets} predicted)`
        : `${r.status}: ${r.message}`;
      output.textContent = text;
      if (r.gold_tree) drawTree(goldDrawing, r.gold_tree);
    } catch (error) {
      output.append(element("div", "error", error.message));
    }
  });
  gold.append(input, button, output, goldDrawing);
  return [drawing, gold];
}

async function selectResult(index, sentence) {
  document.querySelectorAll(".result").forEach((card) => {
    card.classList.toggle("selected", Number(card.dataset.index) === index);
  });
  $("attention-panel").hidden = false;
  $("attention-sentence").textContent = sentence;
  $("attention-status").textContent = "loading…";
  try {
    state.attention = await post("/api/attention", { sentence, ...state.settings });
    state.target = 0;
    showError($("attention-error"), null);
    fillSelectors();
    drawAttention();
  } catch (error) {
    showError($("attention-error"), error);
  } finally {
    $("attention-status").textContent = "";
  }
}

function fillSelectors() {
  const data = state.attention;
  const layers = data.decoder_cross.length;
  const heads = layers ? data.decoder_cross[0].length : 0;
  const fill = (select, count, name, chosen) => {
    select.replaceChildren();
    select.append(new Option(`average of ${count}`, "avg"));
    for (let i = 0; i < count; i++) select.append(new Option(`${name} ${i}`, String(i)));
    select.value = chosen;
  };
  fill($("layer"), layers, "layer", String(layers - 1));
  fill($("head"), heads, "head", "avg");
}

// maps [layers][heads][q][k] --> [q][k] for the chosen layer and head (or their averages).
function pick(maps) {
  const layer = $("layer").value;
  const head = $("head").value;
  const layers = layer === "avg" ? maps : [maps[Number(layer)]];
  const chosen = layers.flatMap((heads) => (head === "avg" ? heads : [heads[Number(head)]]));
  return chosen[0].map((row, q) => row.map((_, k) => chosen.reduce((sum, m) => sum + m[q][k], 0) / chosen.length));
}

function drawAttention() {
  const data = state.attention;
  if (!data) return;
  const cross = pick(data.decoder_cross);
  const select = (row) => { state.target = row; drawAttention(); };
  const targets = $("target-tokens");
  targets.replaceChildren(element("span", "row-label muted", "target"));
  data.target.forEach((label, i) => {
    const button = element("button", `token target-token${i === state.target ? " selected" : ""}`, label);
    button.type = "button";
    button.addEventListener("click", () => select(i));
    targets.append(button);
  });
  const sources = $("source-weights");
  sources.replaceChildren(element("span", "row-label muted", "source"));
  data.source.forEach((label, j) => {
    const weight = cross.length ? cross[state.target][j] : 0;
    const token = element("span", "token source-token", label);
    token.style.background = weightColor(weight);
    token.style.color = weight > 0.55 ? "#fff" : "";
    token.title = weight.toFixed(3);
    sources.append(token);
  });
  heatmap($("cross-heatmap"), cross, data.target, data.source, { selectedRow: state.target, onRowClick: select });
  heatmap($("encoder-heatmap"), pick(data.encoder), data.source, data.source);
  heatmap($("decoder-heatmap"), pick(data.decoder_self), data.target, data.target, { selectedRow: state.target, onRowClick: select });
}

document.addEventListener("DOMContentLoaded", () => {
  loadInfo();
  $("translate-form").addEventListener("submit", translate);
  $("sentences").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("translate-form").requestSubmit();
  });
  $("layer").addEventListener("change", drawAttention);
  $("head").addEventListener("change", drawAttention);
});

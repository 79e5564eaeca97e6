// SVG drawings for t2t-serve's page: attention heatmaps and parse trees, built from the API's
// JSON in the browser. Text goes in through textContent only, never as markup.

const SVG = "http://www.w3.org/2000/svg";

function svgElement(name, attributes = {}, text = null) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  if (text !== null) element.textContent = text;
  return element;
}

// Light to dark blue for a weight in [0, 1].
export function weightColor(weight) {
  const w = Math.max(0, Math.min(1, weight));
  const mix = (from, to) => Math.round(from + (to - from) * w);
  return `rgb(${mix(247, 8)}, ${mix(251, 48)}, ${mix(255, 107)})`;
}

function textWidth(labels) {
  return 8 + 7 * Math.max(1, ...labels.map((label) => label.length));
}

// A heatmap of matrix [rows][columns] with labelled rows (left) and columns (top), one
// <rect class="cell"> per entry. options.selectedRow is outlined; options.onRowClick(row) is
// called when a cell or a row label is clicked.
export function heatmap(container, matrix, rowLabels, columnLabels, options = {}) {
  container.replaceChildren();
  const cell = Math.max(10, Math.min(26, Math.floor(640 / Math.max(1, columnLabels.length))));
  const left = textWidth(rowLabels);
  const top = textWidth(columnLabels);
  const width = Math.max(left + cell * columnLabels.length + 4, left + SCALE_WIDTH + 40);
  const mapBottom = top + cell * rowLabels.length + 4;
  const height = mapBottom + 34;  // the colour scale below the map
  const svg = svgElement("svg", { width, height, viewBox: `0 0 ${width} ${height}` });
  const click = (row) => () => options.onRowClick && options.onRowClick(row);
  columnLabels.forEach((label, j) => {
    const x = left + j * cell + cell / 2 + 4;
    svg.append(svgElement("text", { x, y: top - 4, transform: `rotate(-90 ${x} ${top - 4})` }, label));
  });
  rowLabels.forEach((label, i) => {
    const text = svgElement("text", { x: left - 4, y: top + i * cell + cell / 2 + 4, "text-anchor": "end" }, label);
    text.addEventListener("click", click(i));
    svg.append(text);
    matrix[i].forEach((weight, j) => {
      const rect = svgElement("rect", {
        class: "cell",
        x: left + j * cell,
        y: top + i * cell,
        width: cell,
        height: cell,
        fill: weightColor(weight),
        "data-row": i,
        "data-column": j,
      });
      rect.append(svgElement("title", {}, `${label} → ${columnLabels[j]}: ${weight.toFixed(3)}`));
      rect.addEventListener("click", click(i));
      svg.append(rect);
    });
  });
  if (options.selectedRow !== undefined && options.selectedRow !== null) {
    svg.append(svgElement("rect", {
      class: "row-mark",
      x: left - 1,
      y: top + options.selectedRow * cell - 1,
      width: cell * columnLabels.length + 2,
      height: cell + 2,
    }));
  }
  colourScale(svg, left, mapBottom + 6);
  container.append(svg);
}

const SCALE_WIDTH = 160;

// The legend of weightColor: a bar from 0 to 1, labelled at 0, 0.5 and 1.
function colourScale(svg, x, y) {
  const steps = 20;
  const group = svgElement("g", { class: "scale" });
  for (let k = 0; k < steps; k++) {
    group.append(svgElement("rect", {
      x: x + (k * SCALE_WIDTH) / steps, y, width: SCALE_WIDTH / steps + 0.5, height: 10,
      fill: weightColor((k + 0.5) / steps),
    }));
  }
  for (const value of [0, 0.5, 1]) {
    group.append(svgElement("text", { x: x + value * SCALE_WIDTH, y: y + 22, "text-anchor": "middle" }, String(value)));
  }
  group.append(svgElement("text", { x: x + SCALE_WIDTH + 8, y: y + 9 }, "attention weight"));
  svg.append(group);
}

// Places a tree {label, children | word}: leaves left to right, a phrase centred over its
// children, one row per depth; words on a row of their own under the deepest level.
function layout(tree) {
  const nodes = [];
  let nextX = 0;
  let maxDepth = 0;
  function place(node, depth) {
    maxDepth = Math.max(maxDepth, depth);
    const item = { label: node.label, word: node.word, depth, children: [] };
    nodes.push(item);
    if (node.word !== undefined) {
      const width = 10 + 7 * Math.max(node.word.length, node.label.length, 2);
      item.x = nextX + width / 2;
      nextX += width;
    } else {
      item.children = (node.children || []).map((child) => place(child, depth + 1));
      const xs = item.children.map((child) => child.x);
      item.x = xs.length ? (Math.min(...xs) + Math.max(...xs)) / 2 : (nextX += 30) - 15;
    }
    return item;
  }
  const root = place(tree, 0);
  return { root, nodes, width: nextX, maxDepth };
}

// Draws a parse tree as SVG into container.
export function drawTree(container, tree) {
  container.replaceChildren();
  const { nodes, width, maxDepth } = layout(tree);
  const row = 38;
  const y = (depth) => 16 + depth * row;
  const wordY = y(maxDepth + 1);
  const svg = svgElement("svg", { width: width + 10, height: wordY + 12 });
  for (const node of nodes) {
    for (const child of node.children) {
      svg.append(svgElement("line", { x1: node.x + 5, y1: y(node.depth) + 4, x2: child.x + 5, y2: y(child.depth) - 12 }));
    }
    if (node.label) svg.append(svgElement("text", { x: node.x + 5, y: y(node.depth) }, node.label));
    if (node.word !== undefined) {
      svg.append(svgElement("line", { x1: node.x + 5, y1: y(node.depth) + 4, x2: node.x + 5, y2: wordY - 12 }));
      svg.append(svgElement("text", { x: node.x + 5, y: wordY, class: "word" }, node.word));
    }
  }
  container.append(svg);
}

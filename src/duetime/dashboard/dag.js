// A workflow's graph as SVG, laid out here (no library, no build step): a small layered
// (Sugiyama-style) layout, left to right.
//  1. layers: longest path from the roots (a step sits one layer right of its deepest parent);
//  2. an edge that spans several layers passes through one virtual point per layer between;
//  3. order within each layer: barycentre sweeps (down, then up), keeping the order with the
//     fewest crossings seen;
//  4. coordinates: layers as columns, each column centred; edges as cubic paths through their
//     virtual points, labelled when they are not on_success.
// layout() is pure (tested on its own); drawDag() builds the SVG from a layout and the states.

import { s } from "/dashboard/svg.js";

const NODE_W = 168;
const NODE_H = 46;
const GAP_X = 72;
const GAP_Y = 22;
const PAD = 12;
const SWEEPS = 8;

// Layers by longest path. `nodes`: names; `edges`: [{from, to}]. A cycle cannot be drawn
// (the API refuses cyclic definitions): its nodes go to the last layer instead of looping.
export function layering(nodes, edges) {
  const parents = new Map(nodes.map((n) => [n, []]));
  const children = new Map(nodes.map((n) => [n, []]));
  for (const e of edges) {
    if (!parents.has(e.to) || !children.has(e.from)) continue;
    parents.get(e.to).push(e.from);
    children.get(e.from).push(e.to);
  }
  const waiting = new Map(nodes.map((n) => [n, parents.get(n).length]));
  const layer = new Map();
  const ready = nodes.filter((n) => waiting.get(n) === 0);
  for (const n of ready) layer.set(n, 0);
  while (ready.length) {
    const n = ready.shift();
    for (const c of children.get(n)) {
      layer.set(c, Math.max(layer.get(c) ?? 0, layer.get(n) + 1));
      waiting.set(c, waiting.get(c) - 1);
      if (waiting.get(c) === 0) ready.push(c);
    }
  }
  const deepest = Math.max(0, ...layer.values());
  for (const n of nodes) if (!layer.has(n)) layer.set(n, deepest + 1);
  return layer;
}

// Crossings between two adjacent layers: `links` are [upperIndex, lowerIndex] pairs.
function crossingsBetween(links) {
  let count = 0;
  for (let i = 0; i < links.length; i++) {
    for (let j = i + 1; j < links.length; j++) {
      const [a1, b1] = links[i];
      const [a2, b2] = links[j];
      if ((a1 - a2) * (b1 - b2) < 0) count++;
    }
  }
  return count;
}

// Total crossings of an ordering: `layers` [[id…]…], `segments` [{from, to}] between
// adjacent layers only.
export function countCrossings(layers, segments) {
  const where = new Map();
  layers.forEach((ids, l) => ids.forEach((id, i) => where.set(id, [l, i])));
  let total = 0;
  for (let l = 0; l + 1 < layers.length; l++) {
    const links = segments
      .filter((s) => where.get(s.from)[0] === l)
      .map((s) => [where.get(s.from)[1], where.get(s.to)[1]]);
    total += crossingsBetween(links);
  }
  return total;
}

function barycentre(ids, neighbours, position) {
  const keyed = ids.map((id, i) => {
    const near = neighbours.get(id) || [];
    const value = near.length ? near.reduce((sum, n) => sum + position.get(n), 0) / near.length : i;
    return { id, value, i };
  });
  keyed.sort((a, b) => a.value - b.value || a.i - b.i);
  return keyed.map((k) => k.id);
}

// The whole layout. `nodes`: step names in definition order; `edges`: [{from, to, on}].
// Returns {layers, nodes: Map name → {x, y, layer}, edges: [{from, to, on, points: [[x, y]…]}],
// width, height, crossings}.
export function layout(nodes, edges) {
  const layer = layering(nodes, edges);
  const depth = Math.max(0, ...layer.values()) + 1;
  const layers = Array.from({ length: depth }, () => []);
  for (const n of nodes) layers[layer.get(n)].push(n);
  // edges split into segments between adjacent layers, through virtual points
  const segments = [];
  const chains = [];
  let virtual = 0;
  for (const e of edges) {
    if (!layer.has(e.from) || !layer.has(e.to)) continue;
    const chain = [e.from];
    for (let l = layer.get(e.from) + 1; l < layer.get(e.to); l++) {
      const id = `\u0000v${virtual++}`;
      layers[l].push(id);
      chain.push(id);
    }
    chain.push(e.to);
    for (let i = 0; i + 1 < chain.length; i++) segments.push({ from: chain[i], to: chain[i + 1] });
    chains.push({ ...e, chain });
  }
  const up = new Map();
  const down = new Map();
  for (const s of segments) {
    if (!up.has(s.to)) up.set(s.to, []);
    up.get(s.to).push(s.from);
    if (!down.has(s.from)) down.set(s.from, []);
    down.get(s.from).push(s.to);
  }
  let order = layers.map((ids) => [...ids]);
  let best = order;
  let fewest = countCrossings(order, segments);
  for (let sweep = 0; sweep < SWEEPS && fewest > 0; sweep++) {
    const position = new Map();
    order.forEach((ids) => ids.forEach((id, i) => position.set(id, i)));
    const next = order.map((ids) => [...ids]);
    if (sweep % 2 === 0) {
      for (let l = 1; l < next.length; l++) {
        next[l] = barycentre(next[l], up, position);
        next[l].forEach((id, i) => position.set(id, i));
      }
    } else {
      for (let l = next.length - 2; l >= 0; l--) {
        next[l] = barycentre(next[l], down, position);
        next[l].forEach((id, i) => position.set(id, i));
      }
    }
    order = next;
    const crossings = countCrossings(order, segments);
    if (crossings < fewest) {
      fewest = crossings;
      best = order.map((ids) => [...ids]);
    }
  }
  const tallest = Math.max(1, ...best.map((ids) => ids.length));
  const height = PAD * 2 + tallest * NODE_H + (tallest - 1) * GAP_Y;
  const width = PAD * 2 + depth * NODE_W + (depth - 1) * GAP_X;
  const at = new Map();
  best.forEach((ids, l) => {
    const column = ids.length * NODE_H + (ids.length - 1) * GAP_Y;
    const top = (height - column) / 2;
    ids.forEach((id, i) => at.set(id, {
      x: PAD + l * (NODE_W + GAP_X), y: top + i * (NODE_H + GAP_Y), layer: l,
    }));
  });
  const placed = new Map(nodes.map((n) => [n, at.get(n)]));
  const drawn = chains.map((e) => {
    const points = e.chain.map((id, i) => {
      const p = at.get(id);
      if (i === 0) return [p.x + NODE_W, p.y + NODE_H / 2];
      if (i === e.chain.length - 1) return [p.x, p.y + NODE_H / 2];
      return [p.x + NODE_W / 2, p.y + NODE_H / 2];
    });
    return { from: e.from, to: e.to, on: e.on || "on_success", points };
  });
  return {
    layers: best.map((ids) => ids.filter((id) => !id.startsWith("\u0000"))),
    nodes: placed, edges: drawn, width, height, crossings: fewest,
  };
}

// An SVG path through `points`, each hop a horizontal-tangent cubic.
export function pathThrough(points) {
  let d = `M${points[0][0].toFixed(1)},${points[0][1].toFixed(1)}`;
  for (let i = 1; i < points.length; i++) {
    const [x0, y0] = points[i - 1];
    const [x1, y1] = points[i];
    const mid = (x0 + x1) / 2;
    d += ` C${mid.toFixed(1)},${y0.toFixed(1)} ${mid.toFixed(1)},${y1.toFixed(1)} ${x1.toFixed(1)},${y1.toFixed(1)}`;
  }
  return d;
}

function clip(text, max) {
  return text.length > max ? text.slice(0, max - 1) + "…" : text;
}

// What a node shows under its name: the state, or a mapped step's items counter.
export function nodeCaption(view) {
  if (view.items) {
    const { total, done, failed } = view.items;
    return `${done}/${total} done${failed ? `, ${failed} failed` : ""}`;
  }
  return view.state;
}

// The graph: `shape` from layout(), `views` Map name → {state, items?, title}. Each node is a
// focusable <g class="dag-node {state}" data-step=…>; `onSelect(name)` on click or Enter.
export function drawDag(shape, views, { selected = null, onSelect = () => {} } = {}) {
  const svg = s("svg", {
    class: "dag", viewBox: `0 0 ${shape.width} ${shape.height}`,
    width: shape.width, height: shape.height, role: "group", "aria-label": "workflow graph",
  });
  svg.append(s("defs", {}, s("marker", {
    id: "dag-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
    orient: "auto-start-reverse",
  }, s("path", { d: "M0,0 L10,5 L0,10 z", class: "dag-arrowhead" }))));
  for (const e of shape.edges) {
    const g = s("g", { class: `dag-edge ${e.on}`, "data-from": e.from, "data-to": e.to });
    g.append(s("path", { d: pathThrough(e.points), "marker-end": "url(#dag-arrow)" }));
    if (e.on !== "on_success") {
      const [x0, y0] = e.points[0];
      const [x1, y1] = e.points[1];
      g.append(s("text", { class: "dag-label", x: ((x0 + x1) / 2).toFixed(1), y: ((y0 + y1) / 2 - 4).toFixed(1), "text-anchor": "middle" }, e.on));
    }
    svg.append(g);
  }
  for (const [name, p] of shape.nodes) {
    const view = views.get(name) || { state: "pending" };
    const g = s("g", {
      class: `dag-node ${view.state}${selected === name ? " selected" : ""}`,
      "data-step": name, "data-state": view.state, tabindex: 0, role: "button",
      "aria-label": `step ${name}: ${nodeCaption(view)}`, transform: `translate(${p.x},${p.y})`,
    });
    g.append(s("title", {}, view.title || `${name}: ${nodeCaption(view)}`));
    g.append(s("rect", { width: NODE_W, height: NODE_H, rx: 7 }));
    g.append(s("text", { class: "dag-name", x: 10, y: 19 }, clip(name, 22)));
    g.append(s("text", { class: "dag-caption", x: 10, y: 36 }, clip(nodeCaption(view), 26)));
    if (view.items) g.classList.add("mapped");
    g.addEventListener("click", () => onSelect(name));
    g.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); onSelect(name); }
    });
    svg.append(g);
  }
  return svg;
}

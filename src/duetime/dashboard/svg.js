// SVG elements for the charts (app.js) and the workflow graph (dag.js): s(tag, attrs,
// ...children) is h() for the SVG namespace (children: nodes, or text for anything else).

const svgNS = "http://www.w3.org/2000/svg";

export function s(tag, attrs, ...children) {
  const el = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

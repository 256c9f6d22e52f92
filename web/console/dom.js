// h builds an element: h("a", {href: "#"}, "text", child, ...). Attributes
// that are true are set empty, false or null ones are left out; children
// are nodes or strings (set as text, never parsed as HTML).
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (name === "hidden" || name === "open" || name === "disabled") el[name] = Boolean(value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== "") el.append(child);
  }
  return el;
}

// shortID shortens a UUID to its last 8 characters for display.
export const shortID = (id) => (id && id.length > 12 ? `…${id.slice(-8)}` : id || "");

// when shows a timestamp as local date and time, compactly.
export function when(iso) {
  const d = new Date(iso);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" }) : d.toLocaleString();
}

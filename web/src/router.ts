// A small history router: the dashboard's routes are paths under
// /dashboard/, which the server answers with index.html.
import { useEffect, useState } from "preact/hooks";
import { base } from "./api";

const listeners = new Set<() => void>();

export function navigate(to: string, replace = false): void {
  const url = base + to.replace(/^\//, "");
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  listeners.forEach((f) => f());
}

window.addEventListener("popstate", () => listeners.forEach((f) => f()));

// usePath returns the path below /dashboard/ ("" for the list).
export function usePath(): string {
  const [path, setPath] = useState(current());
  useEffect(() => {
    const f = () => setPath(current());
    listeners.add(f);
    return () => {
      listeners.delete(f);
    };
  }, []);
  return path;
}

function current(): string {
  const p = location.pathname;
  return p.startsWith(base) ? p.slice(base.length).replace(/\/$/, "") : "";
}

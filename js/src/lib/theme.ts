/**
 * Is the page dark, and what colour is really behind the widget? Chip text colour is chosen
 * against the chip colour blended over this background, so it must follow theme switches.
 */
import { parseCssColor, relativeLuminance, type RGB } from "./color";

const LIGHT_BG: RGB = [255, 255, 255];
const DARK_BG: RGB = [17, 17, 17]; // JupyterLab dark --jp-layout-color0

/** The first opaque background colour from `el` up through its ancestors (null if none). */
function computedBackground(el: Element | null): RGB | null {
  const view = (el?.ownerDocument?.defaultView ?? (typeof window !== "undefined" ? window : null)) as Window | null;
  for (let e: Element | null = el; e && view; e = e.parentElement) {
    const c = parseCssColor(view.getComputedStyle(e).backgroundColor);
    if (c && c.alpha > 0.5) return c.rgb;
  }
  return null;
}

/** Host hint: true/false when JupyterLab or VS Code says which theme is on, else null. */
function hostSaysDark(doc: Document): boolean | null {
  const body = doc.body;
  if (!body) return null;
  const jp = body.dataset.jpThemeLight;
  if (jp === "true") return false;
  if (jp === "false") return true;
  if (body.classList.contains("vscode-dark") || body.classList.contains("vscode-high-contrast")) return true;
  if (body.classList.contains("vscode-light")) return false;
  return null;
}

/** True when the page around `el` is dark (host hint first, then background luminance). */
export function isDark(el: Element): boolean {
  const doc = el.ownerDocument ?? document;
  const hint = hostSaysDark(doc);
  if (hint !== null) return hint;
  const bg = computedBackground(el);
  return bg ? relativeLuminance(bg) < 0.2 : false;
}

/** The opaque page background behind `el`; a theme default when none is set anywhere. */
export function pageBackground(el: Element): RGB {
  const dark = isDark(el);
  const bg = computedBackground(el);
  // A background that disagrees with the host's theme is an unrelated wrapper; trust the theme.
  if (bg && (relativeLuminance(bg) < 0.2) === dark) return bg;
  return dark ? DARK_BG : LIGHT_BG;
}

/**
 * Calls `onChange` when the theme may have changed (attributes of <body> or <html>: JupyterLab
 * flips data-jp-theme-light, VS Code swaps classes) and the darkness or background really
 * changed. Returns the function that stops watching.
 */
export function watchTheme(el: Element, onChange: () => void): () => void {
  const doc = el.ownerDocument ?? document;
  const view = doc.defaultView as (Window & typeof globalThis) | null;
  const MO = view?.MutationObserver ?? (typeof MutationObserver !== "undefined" ? MutationObserver : undefined);
  if (!MO) return () => {};
  const key = () => `${isDark(el)}|${pageBackground(el).join(",")}`;
  let last = key();
  const obs = new MO(() => {
    const now = key();
    if (now !== last) {
      last = now;
      onChange();
    }
  });
  const opts = { attributes: true, attributeFilter: ["class", "data-jp-theme-light", "data-jp-theme-name", "style"] };
  if (doc.body) obs.observe(doc.body, opts);
  if (doc.documentElement) obs.observe(doc.documentElement, opts);
  return () => obs.disconnect();
}

/**
 * How a chart is embedded: offline (the vega loader refuses every URL), the renderer, the
 * theme's colours from JupyterLab's CSS variables, and the export-only actions menu.
 */
import type { EmbedOptions } from "vega-embed";
import { defaultColors, themeConfig } from "../lib/vega_data";
import { isDark } from "../lib/theme";

/** JS -> Python selection updates wait this long for the brush to settle (drags fire per frame). */
export const SELECTION_DEBOUNCE_MS = 150;

/**
 * Knobs for tests and hosts. `renderer` "auto" picks canvas (fast with many points) where a 2-D
 * canvas context exists, else svg (happy-dom and other DOMs without canvas).
 */
export const chartOptions: { renderer: "auto" | "canvas" | "svg" | "none"; debounceMs: number } = {
  renderer: "auto",
  debounceMs: SELECTION_DEBOUNCE_MS,
};

function blocked(uri: unknown): Promise<never> {
  return Promise.reject(new Error(`ChartWidget loads nothing from the network (refused: ${String(uri)})`));
}

/**
 * A vega loader that refuses every URL (data, images, hrefs): the chart's data arrive through the
 * rpc, and a notebook must not reach out to the network behind the user's back.
 */
export const offlineLoader = {
  options: {},
  fileAccess: false,
  load: blocked,
  sanitize: blocked,
  http: blocked,
  file: blocked,
};

/** canvas when the DOM can really draw on one, else svg. */
function pickRenderer(): "canvas" | "svg" | "none" {
  if (chartOptions.renderer !== "auto") return chartOptions.renderer;
  try {
    const c = document.createElement("canvas") as HTMLCanvasElement;
    if (c.getContext && c.getContext("2d")) return "canvas";
  } catch {
    /* no canvas: fall through */
  }
  return "svg";
}

/** The page colours, from JupyterLab's CSS variables where set, else theme defaults. */
function pageColors(el: Element) {
  const dark = isDark(el);
  const d = defaultColors(dark);
  // Browsers inherit custom properties, so the first element answers; the walk up is for DOMs
  // that do not (happy-dom) and costs a few lookups per embed.
  const v = (name: string, fallback: string) => {
    for (let e: Element | null = el; e; e = e.parentElement) {
      const value = getComputedStyle(e).getPropertyValue(name).trim();
      if (value) return value;
    }
    return fallback;
  };
  return {
    dark,
    colors: { text: v("--jp-ui-font-color1", d.text), text2: v("--jp-ui-font-color2", d.text2), border: v("--jp-border-color2", d.border) },
  };
}

/** The vega-embed options for a chart inside `root`, logging through `logger`. */
export function embedOptions(root: Element, logger: unknown): EmbedOptions {
  const { dark, colors } = pageColors(root);
  return {
    mode: "vega-lite",
    renderer: pickRenderer() as any,
    // Export works offline (the image is made in the page); source/editor would open windows or URLs.
    actions: { export: { svg: true, png: true }, source: false, compiled: false, editor: false },
    loader: offlineLoader as any,
    config: themeConfig(colors) as any,
    tooltip: { theme: dark ? "dark" : "light" } as any,
    logger: logger as any,
    downloadFileName: "chart",
  };
}

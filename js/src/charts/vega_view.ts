/** Reading from and writing to a live vega View: selection signals and datasets replaced in place. */
import * as vega from "vega";
import { datasetNames, normalizeSelection, type SelectionValue } from "../lib/vega_data";

/** The view's current value of a selection signal (null when empty or when the view lacks it). */
export function viewSelection(view: vega.View | null, name: string): SelectionValue {
  if (!view) return null;
  try {
    return normalizeSelection(view.signal(name));
  } catch {
    return null;
  }
}

/** True when the view has signal `name`. */
export function hasSignal(view: vega.View | null, name: string): boolean {
  try {
    return !!view && (view.signal(name), true);
  } catch {
    return false;
  }
}

function hasDataset(view: vega.View, name: string): boolean {
  try {
    view.data(name);
    return true;
  } catch {
    return false;
  }
}

/** Puts every dataset into `v` (in place: same View, brushes kept in data space); throws for ones `spec` names but lacks. */
export async function insertData(v: vega.View, datasets: Map<string, Record<string, unknown>[]>, spec: any): Promise<void> {
  for (const [name, rows] of datasets) {
    if (!hasDataset(v, name)) continue; // a dataset the spec does not use
    v.change(
      name,
      vega
        .changeset()
        .remove(() => true)
        .insert(rows),
    );
  }
  // Autosize ran when the view was empty (no axis labels yet) and by default runs only once.
  v.resize();
  await v.runAsync();
  const missing = datasetNames(spec).filter((n) => !datasets.has(n));
  if (missing.length) throw new Error(`the data reply has no dataset ${missing.map((n) => `"${n}"`).join(", ")}`);
}

/** Entry of the ChartWidget front end (built to rlviz_widgets/static/charts.js); the parts are in charts/. */
export { default, chartOptions, offlineLoader, SELECTION_DEBOUNCE_MS, type DataReply } from "./charts/index";

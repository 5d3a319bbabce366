/** Entry of the RunView front end (built to rlviz_widgets/static/run_view.js); the parts are in run_view/. */
export { default } from "./run_view/index";

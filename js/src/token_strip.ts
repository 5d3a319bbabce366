/** Entry of the TokenStrip front end (built to rlviz_widgets/static/token_strip.js); the parts are in token_strip/. */
export { default } from "./token_strip/index";

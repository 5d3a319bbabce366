/** Entry of the SampleTable front end (built to rlviz_widgets/static/sample_table.js); the parts are in sample_table/. */
export { default } from "./sample_table/index";
export { PAGE_SIZE } from "./sample_table/pager";
export { ROW_HEIGHT } from "./sample_table/rows";

import { NODE_REDIS_6 } from '../helpers/client-cells.js';
import { clientCellContract } from './client-cell-contract.js';

// node-redis as `npm install redis` gives it today (6.x), with its defaults.
clientCellContract(NODE_REDIS_6);

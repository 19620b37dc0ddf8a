import { NODE_REDIS_5_RESP3 } from '../helpers/client-cells.js';
import { clientCellContract } from './client-cell-contract.js';

clientCellContract(NODE_REDIS_5_RESP3);
